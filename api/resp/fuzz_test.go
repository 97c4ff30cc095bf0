package resp

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"github.com/weir-rl/weir/api"
)

// fakeDecider answers every take as allowed from a bucket of 10 and every
// lease as granted, recording nothing; "fail" as a limit name makes Take
// return an invalid-input error. It is safe for concurrent use.
type fakeDecider struct{}

func (fakeDecider) Take(_ context.Context, checks []api.Check) (api.TakeResponse, error) {
	resp := api.TakeResponse{Allowed: true, RulesVersion: 1}
	for _, c := range checks {
		if c.Limit == "fail" {
			return api.TakeResponse{}, api.Errorf(api.CodeInvalid, "unknown limit")
		}
		resp.Results = append(resp.Results, api.Result{Limit: c.Limit, Allowed: true, Remaining: 10 - c.Cost, Capacity: 10, ResetAfter: time.Second})
	}
	return resp, nil
}

func (fakeDecider) Acquire(context.Context, api.AcquireRequest) (api.AcquireResponse, error) {
	return api.AcquireResponse{Granted: true, ID: "id", FencingToken: 1, TTL: time.Second}, nil
}

func (fakeDecider) Renew(_ context.Context, _ string, ttl time.Duration) (time.Duration, error) {
	return ttl, nil
}
func (fakeDecider) Release(context.Context, string) error { return nil }
func (fakeDecider) Cluster(context.Context, string, string) (api.ClusterInfo, error) {
	return api.ClusterInfo{}, nil
}

func (fakeDecider) Readiness() api.Readiness                     { return api.Readiness{Ready: true} }
func (fakeDecider) Forget(context.Context, string) (bool, error) { return false, nil }
func (fakeDecider) Allot(context.Context, api.AllotRequest) (api.AllotResponse, error) {
	return api.AllotResponse{}, nil
}
func (fakeDecider) Return(context.Context, api.ReturnRequest) error { return nil }

// skipValue returns the length of the first RESP2 or RESP3 value in b, or
// -1 when b does not start with a whole value.
func skipValue(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	end := bytes.Index(b, []byte("\r\n"))
	if end < 0 {
		return -1
	}
	line := string(b[1:end])
	n := end + 2
	switch b[0] {
	case '+', '-', ':', '_':
		return n
	case '$', '=':
		size, err := strconv.Atoi(line)
		if err != nil {
			return -1
		}
		if size < 0 {
			return n
		}
		if len(b) < n+size+2 || string(b[n+size:n+size+2]) != "\r\n" {
			return -1
		}
		return n + size + 2
	case '*', '%':
		count, err := strconv.Atoi(line)
		if err != nil {
			return -1
		}
		if b[0] == '%' {
			count *= 2
		}
		for range max(count, 0) {
			m := skipValue(b[n:])
			if m < 0 {
				return -1
			}
			n += m
		}
		return n
	}
	return -1
}

// FuzzDispatch feeds arbitrary bytes through the command reader and the
// dispatcher: nothing may panic or spin, and every command read gets
// exactly one well-formed reply (plus one for a protocol error).
func FuzzDispatch(f *testing.F) {
	for _, seed := range []string{
		"*1\r\n$4\r\nPING\r\n",
		"*3\r\n$9\r\nWEIR.TAKE\r\n$6\r\nexport\r\n$1\r\nk\r\n",
		"*7\r\n$10\r\nWEIR.MTAKE\r\n$1\r\na\r\n$1\r\nk\r\n$1\r\n1\r\n$4\r\nfail\r\n$1\r\nk\r\n$1\r\n1\r\n",
		"*5\r\n$11\r\nCL.THROTTLE\r\n$7\r\nuser123\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n",
		"*4\r\n$12\r\nWEIR.ACQUIRE\r\n$2\r\ndb\r\n$1\r\nk\r\n$3\r\nTTL\r\n",
		"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*2\r\n$7\r\nCOMMAND\r\n$4\r\nDOCS\r\n",
		"*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$1\r\nx\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n",
		"*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n",
		"PING\r\nWEIR.TAKE export k 2\r\n",
		"*2\r\n$10\r\nWEIR.RENEW\r\n$0\r\n\r\n",
		"*6\r\n$10\r\nWEIR.CTAKE\r\n$2\r\nid\r\n$2\r\n50\r\n$1\r\na\r\n$1\r\nk\r\n$1\r\n0\r\n",
		"WEIR.CTAKE \"\" 0 a k 1 fail k 2\r\nWEIR.CTAKE x -1 a k 1\r\n",
		"*-1\r\n*0\r\n",
		"*1\r\n$-5\r\n",
		"*1\r\n$9223372036854775807\r\n", // panicked in redcon's reader
		"*4611686018427387904\r\n",       // spun in redcon's reader
		"MULTI\r\nWEIR.TAKE export k\r\nNOPE\r\nEXEC\r\nMULTI\r\nPING\r\nEXEC\r\nDISCARD\r\n",
		"HELLO 3\r\nINFO\r\nINFO server stats\r\nWATCH k\r\nUNWATCH\r\n",
	} {
		f.Add([]byte(seed))
	}
	cfg := DefaultConfig()
	cfg.MaxArgs = 16
	cfg.MaxBulkBytes = 64
	cfg.MaxRequestBytes = 256
	s := New(fakeDecider{}, cfg, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := newReader(bytes.NewReader(data), s.cfg.MaxArgs, s.cfg.MaxBulkBytes, s.cfg.MaxRequestBytes)
		var out bytes.Buffer
		w := redcon.NewWriter(&out)
		st := session{id: 1, proto: 2, authed: true}
		replies := 0
		for !st.quit {
			args, err := rd.next()
			if err != nil {
				if _, ok := errors.AsType[protocolError](err); ok {
					w.WriteError("ERR " + err.Error())
					replies++
				}
				break
			}
			if len(args) == 0 || len(args) > cfg.MaxArgs {
				t.Fatalf("reader returned %d arguments", len(args))
			}
			replies++
			s.dispatch(context.Background(), &st, args, w)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		b := out.Bytes()
		for got := 0; ; got++ {
			if len(b) == 0 {
				if got != replies {
					t.Fatalf("%d replies expected, %d written: %q", replies, got, out.Bytes())
				}
				return
			}
			n := skipValue(b)
			if n < 0 {
				t.Fatalf("malformed reply at %q (all: %q)", b, out.Bytes())
			}
			b = b[n:]
		}
	})
}

// TestReaderBounds: headers over the bounds are protocol errors before
// anything is allocated for them, and good input reads back exactly.
func TestReaderBounds(t *testing.T) {
	tests := []struct {
		in   string
		want string // error, or the arguments joined by "|"
	}{
		{"*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n", "PING|hi"},
		{"PING  hi\n", "PING|hi"},
		{"\r\n*0\r\nPING\r\n", "PING"},
		{"*17\r\n", "Protocol error: command has 17 arguments, over the 16 maximum"},
		{"*4611686018427387904\r\n", "Protocol error: invalid multibulk length"},
		{"*1\r\n$65\r\n", "Protocol error: argument of 65 bytes, over the 64-byte maximum"},
		{"*1\r\n$9223372036854775807\r\n", "Protocol error: argument of 9223372036854775807 bytes, over the 64-byte maximum"},
		{"*1\r\n$-1\r\n", "Protocol error: invalid bulk length"},
		{"*1\r\n$2\r\nabcd", "Protocol error: invalid bulk length"},
		{"*1\r\n:2\r\n", "Protocol error: expected '$', got ':'"},
		{"*5\r\n$60\r\n" + strings.Repeat("a", 60) + "\r\n$60\r\n" + strings.Repeat("a", 60) + "\r\n$60\r\n" + strings.Repeat("a", 60) + "\r\n$60\r\n" + strings.Repeat("a", 60) + "\r\n$60\r\n", "Protocol error: command over 256 bytes"},
		{strings.Repeat("a", maxInline+1), "Protocol error: too big inline request"},
		{"*1\r\n$4\r\nPI", "unexpected EOF"},
	}
	for _, tt := range tests {
		rd := newReader(strings.NewReader(tt.in), 16, 64, 256)
		args, err := rd.next()
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = string(bytes.Join(args, []byte("|")))
		}
		if got != tt.want {
			t.Errorf("%.40q: got %q, want %q", tt.in, got, tt.want)
		}
	}
}
