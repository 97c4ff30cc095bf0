package resp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestBadArgumentsSpendNothing: every malformed command gets an error
// reply with its reason, and no bucket or lease changes.
func TestBadArgumentsSpendNothing(t *testing.T) {
	rn := startNode(t, testLimits, nil)
	c := rn.client(t, nil)
	ctx := context.Background()
	long := strings.Repeat("k", 513)
	tests := []struct {
		args []any
		want string // the whole error
	}{
		{[]any{"WEIR.TAKE"}, "ERR wrong number of arguments for 'weir.take' command"},
		{[]any{"WEIR.TAKE", "export"}, "ERR wrong number of arguments for 'weir.take' command"},
		{[]any{"WEIR.TAKE", "export", "k", "1", "2"}, "ERR wrong number of arguments for 'weir.take' command"},
		{[]any{"WEIR.TAKE", "export", "k", "0"}, "ERR cost must be a positive integer"},
		{[]any{"WEIR.TAKE", "export", "k", "-1"}, "ERR cost must be a positive integer"},
		{[]any{"WEIR.TAKE", "export", "k", "1.5"}, "ERR cost must be a positive integer"},
		{[]any{"WEIR.TAKE", "export", "k", " 1"}, "ERR cost must be a positive integer"},
		{[]any{"WEIR.TAKE", "export", "k", "9"}, `ERR checks[0]: cost 9 exceeds capacity 6 of limit "export"`},
		{[]any{"WEIR.TAKE", "nope", "k"}, `ERR checks[0]: unknown limit "nope"`},
		{[]any{"WEIR.TAKE", "export", ""}, "ERR checks[0].key is empty"},
		{[]any{"WEIR.TAKE", "", "k"}, "ERR checks[0].limit is empty"},
		{[]any{"WEIR.TAKE", "export", long}, "ERR checks[0].key is 513 bytes, over the 512-byte maximum"},
		{[]any{"WEIR.TAKE", "export", "\xff"}, "ERR checks[0].key is not valid UTF-8"},
		{[]any{"WEIR.TAKE", "export-db", "k"}, `ERR checks[0]: limit "export-db" is a concurrency limit: acquire a lease instead`},
		{[]any{"WEIR.MTAKE", "export", "k"}, "ERR wrong number of arguments for 'weir.mtake' command"},
		{[]any{"WEIR.MTAKE", "export", "k", "1", "search"}, "ERR wrong number of arguments for 'weir.mtake' command"},
		{[]any{"WEIR.MTAKE", "export", "k", "x"}, "ERR checks[0].cost must be a positive integer"},
		{[]any{"WEIR.MTAKE", "export", "k", "1", "nope", "k", "1"}, `ERR checks[1]: unknown limit "nope"`},
		{[]any{"WEIR.CTAKE", "id", "0", "export"}, "ERR wrong number of arguments for 'weir.ctake' command"},
		{[]any{"WEIR.CTAKE", "id", "0", "export", "k", "1", "search"}, "ERR wrong number of arguments for 'weir.ctake' command"},
		{[]any{"WEIR.CTAKE", strings.Repeat("i", 33), "0", "export", "k", "1"}, "ERR request_id has 33 bytes, over the 32 maximum"},
		{[]any{"WEIR.CTAKE", "id", "-1", "export", "k", "1"}, "ERR budget_ms must be an integer from 0 to 86400000"},
		{[]any{"WEIR.CTAKE", "id", "86400001", "export", "k", "1"}, "ERR budget_ms must be an integer from 0 to 86400000"},
		{[]any{"WEIR.CTAKE", "id", "x", "export", "k", "1"}, "ERR budget_ms must be an integer from 0 to 86400000"},
		{[]any{"WEIR.CTAKE", "id", "0", "export", "k", "1.5"}, "ERR checks[0].cost must be an integer"},
		{[]any{"WEIR.CTAKE", "id", "0", "export", "k", "-1"}, "ERR checks[0].cost must be a positive integer"},
		{[]any{"WEIR.CTAKE", "id", "0", "export", "k", "9"}, `ERR checks[0]: cost 9 exceeds capacity 6 of limit "export"`},
		{[]any{"WEIR.CTAKE", "id", "0", "export", "k", "1", "nope", "k", "1"}, `ERR checks[1]: unknown limit "nope"`},
		{[]any{"WEIR.CTAKE", "id", "0", "export", "", "1"}, "ERR checks[0].key is empty"},
		{[]any{"WEIR.CTAKE", "id", "0", "export-db", "k", "1"}, `ERR checks[0]: limit "export-db" is a concurrency limit: acquire a lease instead`},
		{[]any{"CL.THROTTLE", "k", "15", "30"}, "ERR wrong number of arguments for 'cl.throttle' command"},
		{[]any{"CL.THROTTLE", "k", "15", "30", "60", "1", "2"}, "ERR wrong number of arguments for 'cl.throttle' command"},
		{[]any{"CL.THROTTLE", "k", "x", "30", "60"}, "ERR max_burst must be an integer"},
		{[]any{"CL.THROTTLE", "k", "15", "3.5", "60"}, "ERR count per period must be an integer"},
		{[]any{"CL.THROTTLE", "k", "-1", "30", "60"}, "ERR max_burst must be >= 0"},
		{[]any{"CL.THROTTLE", "k", "15", "0", "60"}, `ERR checks[0]: inline limit: limit "cl.throttle": rate "0/60s": count must be > 0, got 0`},
		{[]any{"CL.THROTTLE", "k", "15", "30", "0"}, `ERR checks[0]: inline limit: limit "cl.throttle": rate "30/0s": period must be between 1ms and 366d`},
		{[]any{"CL.THROTTLE", "k", "2000000000000000", "30", "60"}, `ERR checks[0]: inline limit: limit "cl.throttle": "burst" must be at most 1000000000000000, got 2000000000000001`},
		{[]any{"CL.THROTTLE", "", "15", "30", "60"}, "ERR checks[0].key is empty"},
		// The remaining differences from redis-cell (api/resp/doc.go): negative
		// values and parameters past the limits file's bounds are errors.
		{[]any{"CL.THROTTLE", "k", "15", "-30", "60"}, `ERR checks[0]: inline limit: limit "cl.throttle": rate "-30/60s": count "-30" must be a positive whole number`},
		{[]any{"CL.THROTTLE", "k", "15", "-30", "-60"}, `ERR checks[0]: inline limit: limit "cl.throttle": rate "-30/-60s": count "-30" must be a positive whole number`},
		{[]any{"CL.THROTTLE", "k", "15", "30", "-60"}, `ERR checks[0]: inline limit: limit "cl.throttle": rate "30/-60s": period must be between 1ms and 366d`},
		{[]any{"CL.THROTTLE", "k", "15", "30", "60", "-1"}, "ERR quantity must not be negative: a negative quantity would give tokens back"},
		{[]any{"CL.THROTTLE", "k", "15", "30", "31622401"}, `ERR checks[0]: inline limit: limit "cl.throttle": rate "30/31622401s": period must be between 1ms and 366d`},
		{[]any{"CL.THROTTLE", "k", "15", "1000000000000001", "60"}, `ERR checks[0]: inline limit: limit "cl.throttle": rate "1000000000000001/60s": count must be at most 1000000000000000`},
		{[]any{"WEIR.ACQUIRE", "export-db"}, "ERR wrong number of arguments for 'weir.acquire' command"},
		{[]any{"WEIR.ACQUIRE", "export-db", "k", "TTL"}, "ERR TTL needs a value"},
		{[]any{"WEIR.ACQUIRE", "export-db", "k", "TTL", "-5"}, "ERR ttl_ms must not be negative"},
		{[]any{"WEIR.ACQUIRE", "export-db", "k", "TTL", "x"}, "ERR ttl_ms must be an integer"},
		{[]any{"WEIR.ACQUIRE", "export-db", "k", "TTL", "1", "ttl", "2"}, "ERR TTL is given twice"},
		{[]any{"WEIR.ACQUIRE", "export-db", "k", "FOR", "1"}, "ERR unknown option 'FOR' (want TTL, WAIT or HOLDER)"},
		{[]any{"WEIR.ACQUIRE", "export", "k"}, `ERR limit "export" is a rate limit: use take`},
		{[]any{"WEIR.RENEW", ""}, "ERR lease id is empty"},
		{[]any{"WEIR.RENEW", "id", "x"}, "ERR ttl_ms must be an integer"},
		{[]any{"WEIR.RENEW", "not-a-lease"}, "NOTFOUND lease not found: malformed id"},
		{[]any{"WEIR.RELEASE"}, "ERR wrong number of arguments for 'weir.release' command"},
		{[]any{"SELECT", "2"}, "ERR DB index is out of range"},
		{[]any{"HELLO", "4"}, "NOPROTO unsupported protocol version"},
		{[]any{"HELLO", "3", "AUTH", "bob", "pw"}, "WRONGPASS invalid username-password pair or user is disabled."},
		{[]any{"AUTH", "pw"}, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"},
		{[]any{"CLIENT", "KILL", "x"}, "ERR unknown subcommand 'KILL'. Try CLIENT HELP."},
		{[]any{"CLIENT", "SETNAME", "a b"}, "ERR Client names cannot contain spaces, newlines or special characters."},
		{[]any{"COMMAND", "FOO"}, "ERR unknown subcommand 'FOO'. Try COMMAND HELP."},
		{[]any{"FLUSHALL"}, "ERR unknown command 'FLUSHALL'"},
		{[]any{"GET\r\nx"}, "ERR unknown command 'GET??x'"},
	}
	for _, tt := range tests {
		err := c.Do(ctx, tt.args...).Err()
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q: got %v, want %q", tt.args, err, tt.want)
		}
	}
	// Nothing was spent: every bucket and lease limit is still full.
	if got := ints(t, c, "WEIR.TAKE", "export", "k"); !slices.Equal(got, []int64{1, 5, 0, 500}) {
		t.Errorf("export after the bad commands: %v, want a full bucket", got)
	}
	if got := ints(t, c, "CL.THROTTLE", "k", "15", "30", "60"); !slices.Equal(got, []int64{0, 16, 15, -1, 2}) {
		t.Errorf("cl.throttle after the bad commands: %v, want a full bucket", got)
	}
	for range 2 {
		if v, err := c.Do(ctx, "WEIR.ACQUIRE", "export-db", "k").Slice(); err != nil || v[0] != int64(1) {
			t.Errorf("ACQUIRE after the bad commands: %v, %v; want both permits free", v, err)
		}
	}
}

// TestSameReasonAsHTTP: a RESP error carries the detail HTTP gives for the
// same input.
func TestSameReasonAsHTTP(t *testing.T) {
	rn := startNode(t, testLimits, nil)
	c := rn.client(t, nil)
	for _, tc := range []struct {
		resp []any
		body string
	}{
		{[]any{"WEIR.TAKE", "export", "k", "9"}, `{"checks":[{"limit":"export","key":"k","cost":9}]}`},
		{[]any{"WEIR.TAKE", "nope", "k"}, `{"checks":[{"limit":"nope","key":"k"}]}`},
		{[]any{"CL.THROTTLE", "k", "15", "0", "60"}, `{"checks":[{"limit":"cl.throttle","key":"k","inline":{"algorithm":"gcra","burst":16,"rate":"0/60s"}}]}`},
	} {
		res, err := http.Post("http://"+rn.n.HTTPAddr()+"/v1/take", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var e struct{ Detail string }
		if err := json.Unmarshal(b, &e); err != nil || res.StatusCode != 400 {
			t.Fatalf("HTTP %s: %d %s", tc.body, res.StatusCode, b)
		}
		rerr := c.Do(context.Background(), tc.resp...).Err()
		if rerr == nil || rerr.Error() != "ERR "+e.Detail {
			t.Errorf("%q: RESP %v, HTTP detail %q", tc.resp, rerr, e.Detail)
		}
	}
}
