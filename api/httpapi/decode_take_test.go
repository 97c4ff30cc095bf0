package httpapi

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// takeBodies are bodies of POST /v1/take for the differential tests of
// decodeTakeFast; fast says whether the fast path must take it.
var takeBodies = []struct {
	body string
	fast bool
}{
	{`{"checks":[{"limit":"export","key":"tenant:acme","cost":1}]}`, true},
	{`{"checks":[{"limit":"export","key":"tenant:acme"}]}`, true},
	{`{"checks":[{"key":"k","cost":3,"limit":"export"}],"evidence":true}`, true},
	{`{"headers":true,"checks":[{"key":"k","limit":"export"}],"evidence":false}`, true},
	{`{"checks":[{"key":"k","limit":"export"}],"headers":false,"evidence":true}`, true},
	{`{"evidence":false,"checks":[{"limit":"a","key":"b"},{"limit":"c","key":"d","cost":999999999999999999}]}`, true},
	{" \t\r\n{ \"checks\" : [ { \"limit\" : \"a\" , \"key\" : \"b\" , \"cost\" : 7 } ] } \n", true},
	{`{"checks":[{"limit":"export","key":"tenant:{acme}:route/x?y=z&w"}]}`, true},
	// Declined: the JSON decoder answers, with the same result or error.
	{`{"checks":[{"limit":"export","key":"tenant:acme","cost":null}]}`, false},
	{`{"checks":[{"limit":"export","key":"t\u00e9"}]}`, false},
	{`{"checks":[{"limit":"export","key":"té"}]}`, false},
	{`{"checks":[{"limit":"export","key":"a\"b"}]}`, false},
	{`{"checks":[{"limit":"export","key":"k","cost":0}]}`, false},
	{`{"checks":[{"limit":"export","key":"k","cost":-1}]}`, false},
	{`{"checks":[{"limit":"export","key":"k","cost":01}]}`, false},
	{`{"checks":[{"limit":"export","key":"k","cost":1.0}]}`, false},
	{`{"checks":[{"limit":"export","key":"k","cost":1e3}]}`, false},
	{`{"checks":[{"limit":"export","key":"k","cost":"1"}]}`, false},
	{`{"checks":[{"limit":"export","key":"k","cost":1234567890123456789}]}`, false},
	{`{"checks":[{"limit":"export","key":"k","cost":99999999999999999999}]}`, false},
	{`{"checks":[{"limit":"export","key":"k","cost":1,"cost":2}]}`, false},
	{`{"checks":[{"limit":"export","limit":"other","key":"k"}]}`, false},
	{`{"checks":[{"Limit":"export","key":"k"}]}`, false},
	{`{"Checks":[{"limit":"export","key":"k"}]}`, false},
	{`{"checks":[{"limit":"export","key":"k","capacity":5}]}`, false},
	{`{"checks":[{"limit":"export","key":"k"}],"extra":1}`, false},
	{`{"checks":[{"limit":"export","key":"k"}],"checks":[{"limit":"x","key":"y"}]}`, false},
	{`{"checks":[{"limit":"export","key":"k"}],"evidence":true,"evidence":false}`, false},
	{`{"checks":[{"limit":"export","key":"k"}],"evidence":null}`, false},
	{`{"checks":[{"limit":"export","key":"k"}],"evidence":1}`, false},
	{`{"checks":[{"limit":"export","key":"k"}],"headers":true,"headers":false}`, false},
	{`{"checks":[{"limit":"export","key":"k"}],"headers":"true"}`, false},
	{`{"checks":[{"limit":"export","key":"k"}],"Headers":true}`, false},
	{`{"checks":[{"limit":"export","key":"k"}]} {}`, false},
	{`{"checks":[{"limit":"export","key":"k"}]}x`, false},
	{`{"checks":[{"limit":"export","key":"k"},]}`, false},
	{`{"checks":[{"limit":"export","key":"k",}]}`, false},
	{`{"checks":[{"limit":"export","key":"k"}],}`, false},
	{`{"checks":[{"limit":"","key":"k"}]}`, false},
	{`{"checks":[{"limit":"export"}]}`, false},
	{`{"checks":[{}]}`, false},
	{`{"checks":[]}`, false},
	{`{"checks":null}`, false},
	{`{}`, false},
	{``, false},
	{`[]`, false},
	{`{"checks":[{"limit":"export","key":"k"}]`, false},
	{`{"checks":[{"limit":"export","key":"k"`, false},
	{`{"checks":[{"limit":"export","key":"k","cost":`, false},
	{`{"checks":[{"limit":"export","key":"k","cost":1`, false},
	{`{"checks":[{"limit":"export","key":"k"}],"evidence":tru`, false},
	{"\ufeff" + `{"checks":[{"limit":"export","key":"k"}]}`, false},
	{`{"checks":[{"limit":"export","key":"` + strings.Repeat("k", 513) + `"}]}`, false},
	{`{"checks":[{"limit":"export","key":"` + strings.Repeat("k", 512) + `"}]}`, true},
	{`{"checks":[` + strings.Repeat(`{"limit":"a","key":"b"},`, 99) + `{"limit":"a","key":"b"}]}`, true},
	{`{"checks":[` + strings.Repeat(`{"limit":"a","key":"b"},`, 100) + `{"limit":"a","key":"b"}]}`, false},
}

// sameTake requires decodeTakeRequest to agree with decodeTakeRequestJSON
// on body, and decodeTakeFast to agree whenever it accepts.
func sameTake(t *testing.T, body []byte) (fast bool) {
	t.Helper()
	wantChecks, wantOpts, wantErr := decodeTakeRequestJSON(body, fuzzLimits)
	fc, fo, ok := decodeTakeFast(body, fuzzLimits)
	if ok {
		if wantErr != nil {
			t.Fatalf("fast path accepted %q, which the JSON decoder rejects: %v", body, wantErr)
		}
		if !reflect.DeepEqual(fc, wantChecks) || fo != wantOpts {
			t.Fatalf("fast path on %q: %+v %+v; JSON decoder: %+v %+v", body, fc, fo, wantChecks, wantOpts)
		}
	}
	gotChecks, gotOpts, gotErr := decodeTakeRequest(body, fuzzLimits)
	if !reflect.DeepEqual(gotChecks, wantChecks) || gotOpts != wantOpts || !reflect.DeepEqual(gotErr, wantErr) {
		t.Fatalf("decodeTakeRequest(%q) = %+v, %+v, %v; JSON decoder: %+v, %+v, %v", body, gotChecks, gotOpts, gotErr, wantChecks, wantOpts, wantErr)
	}
	return ok
}

// TestDecodeTakeFastAgreesWithJSON: the hand-written decoder takes the
// common bodies and, on every body, answers what encoding/json answers.
func TestDecodeTakeFastAgreesWithJSON(t *testing.T) {
	for i, tc := range takeBodies {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			if fast := sameTake(t, []byte(tc.body)); fast != tc.fast {
				t.Errorf("fast path took %q: %v, want %v", tc.body, fast, tc.fast)
			}
		})
	}
}

// TestDecodeTakeFastOnFuzzCorpus replays the take decoder's fuzz corpus
// through the differential check.
func TestDecodeTakeFastOnFuzzCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzDecodeTakeRequest/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, lit, ok := strings.Cut(string(b), "[]byte(")
		if !ok {
			t.Fatalf("%s: not a []byte corpus entry", f)
		}
		body, err := strconv.Unquote(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(lit), ")")))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		sameTake(t, []byte(body))
	}
}

// FuzzDecodeTakeFast is the differential fuzz target: whatever the fast
// path accepts, encoding/json decodes to the same checks.
func FuzzDecodeTakeFast(f *testing.F) {
	for _, tc := range takeBodies {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { sameTake(t, body) })
}
