package tracing

import (
	"testing"

	"github.com/weir-rl/weir/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
