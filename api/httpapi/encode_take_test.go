package httpapi

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"

	"github.com/weir-rl/weir/api"
)

// TestAppendTakeJSONKnowsEveryField fails when a field is added to the
// take answer without teaching appendTakeJSON to write it.
func TestAppendTakeJSONKnowsEveryField(t *testing.T) {
	for typ, want := range map[reflect.Type][]string{
		reflect.TypeFor[takeResponseJSON](): {"Allowed", "RetryAfterMs", "RulesVersion", "Results", "RingEpoch"},
		reflect.TypeFor[resultJSON]():       {"Limit", "Allowed", "Remaining", "Capacity", "RetryAfterMs", "ResetAfterMs", "Source", "Evidence"},
	} {
		var got []string
		for f := range typ.Fields() {
			got = append(got, f.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v has fields %v; appendTakeJSON writes %v: update it (and this list)", typ, got, want)
		}
	}
}

// fill sets every field of the struct v points to from rng, strings
// drawn from strs.
func fill(v reflect.Value, rng *rand.Rand, strs []string) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(rng.IntN(2) == 1)
		case reflect.Int64:
			f.SetInt([]int64{0, 1, 7, -3, 1 << 40, -1 << 63, 1<<63 - 1}[rng.IntN(7)])
		case reflect.Uint64:
			f.SetUint([]uint64{0, 1, 9, 1<<64 - 1}[rng.IntN(4)])
		case reflect.String:
			f.SetString(strs[rng.IntN(len(strs))])
		}
	}
}

// TestAppendTakeJSONIsMarshal: whenever appendTakeJSON answers, its bytes
// are json.Marshal's; and writeTake's response is WriteJSON's in every
// case, the fallback included.
func TestAppendTakeJSONIsMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	plain := []string{"", "export", "bench-1.x_y", "owner", "fallback"}
	odd := append(slices.Clone(plain), "a<b", "a&b", "é", "\x00", `q"`, `\`, "\u2028", "\xff")
	fast := 0
	for n := range 2000 {
		strs := plain
		if n%2 == 1 {
			strs = odd
		}
		out := takeResponseJSON{}
		fill(reflect.ValueOf(&out).Elem(), rng, strs)
		switch k := rng.IntN(5); k {
		case 0:
			out.Results = nil
		default:
			out.Results = make([]resultJSON, k-1)
			for i := range out.Results {
				fill(reflect.ValueOf(&out.Results[i]).Elem(), rng, strs)
				if rng.IntN(10) == 0 {
					out.Results[i].Evidence = &evidenceJSON{Decider: "n1", DecidedAtNs: 5, Instance: "i"}
				}
			}
		}
		want, err := json.Marshal(&out)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := appendTakeJSON(nil, &out); ok {
			fast++
			if string(got) != string(want) {
				t.Fatalf("appendTakeJSON:\n got %s\nwant %s", got, want)
			}
		}
		a, b := httptest.NewRecorder(), httptest.NewRecorder()
		writeTake(a, &out)
		api.WriteJSON(b, http.StatusOK, &out)
		if a.Code != b.Code || a.Body.String() != b.Body.String() || !reflect.DeepEqual(a.Header(), b.Header()) {
			t.Fatalf("writeTake: %d %v %q; WriteJSON: %d %v %q", a.Code, a.Header(), a.Body, b.Code, b.Header(), b.Body)
		}
	}
	if fast < 500 {
		t.Errorf("the hand encoder answered only %d of 2000", fast)
	}
}

func TestPlainJSON(t *testing.T) {
	for s, want := range map[string]bool{
		"": true, "export": true, "a-b.c_d:9 ~": true,
		"a<b": false, "a>b": false, "a&b": false, `a"b`: false, `a\b`: false, "a\nb": false, "\x7f": false, "é": false,
	} {
		if got := plainJSON(s); got != want {
			t.Errorf("plainJSON(%q) = %v, want %v", s, got, want)
		}
	}
}
