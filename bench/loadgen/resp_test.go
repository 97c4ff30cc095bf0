package main

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestAppendCommand(t *testing.T) {
	got := string(appendCommand(nil, "EVALSHA", "abc", "1", "", "k\r\n"))
	want := "*5\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$0\r\n\r\n$3\r\nk\r\n\r\n"
	if got != want {
		t.Fatalf("appendCommand = %q, want %q", got, want)
	}
	// The command is itself a valid reply, an array of bulk strings.
	var v respValue
	if err := readValue(bufio.NewReader(strings.NewReader(got)), &v); err != nil {
		t.Fatal(err)
	}
	if v.Kind != respArray || len(v.Arr) != 5 || string(v.Arr[4].Str) != "k\r\n" || string(v.Arr[3].Str) != "" {
		t.Fatalf("round trip: %+v", v)
	}
}

func TestReadValue(t *testing.T) {
	tests := []struct {
		name, in string
		check    func(v *respValue) bool
	}{
		{"simple", "+OK\r\n", func(v *respValue) bool { return v.Kind == respSimple && string(v.Str) == "OK" }},
		{"error", "-NOSCRIPT No matching script\r\n", func(v *respValue) bool {
			return v.Kind == respError && string(v.Str) == "NOSCRIPT No matching script"
		}},
		{"integer", ":-42\r\n", func(v *respValue) bool { return v.Kind == respInteger && v.Int == -42 }},
		{"max int", ":9223372036854775807\r\n", func(v *respValue) bool { return v.Int == 1<<63-1 }},
		{"bulk", "$5\r\nhe\r\no\r\n", func(v *respValue) bool { return v.Kind == respBulk && string(v.Str) == "he\r\no" && !v.Null }},
		{"empty bulk", "$0\r\n\r\n", func(v *respValue) bool { return v.Kind == respBulk && len(v.Str) == 0 && !v.Null }},
		{"null bulk", "$-1\r\n", func(v *respValue) bool { return v.Kind == respBulk && v.Null }},
		{"null array", "*-1\r\n", func(v *respValue) bool { return v.Kind == respArray && v.Null }},
		{"empty array", "*0\r\n", func(v *respValue) bool { return v.Kind == respArray && !v.Null && len(v.Arr) == 0 }},
		{"script reply", "*3\r\n:1\r\n:999999999999\r\n:0\r\n", func(v *respValue) bool {
			r, err := parseRedisTake(v)
			return err == nil && r.Allowed && r.Remaining == 999999999999 && r.RetryAfter == 0
		}},
		{"nested with error", "*2\r\n*1\r\n$1\r\nx\r\n-ERR inner\r\n", func(v *respValue) bool {
			return len(v.Arr) == 2 && len(v.Arr[0].Arr) == 1 && string(v.Arr[0].Arr[0].Str) == "x" &&
				v.Arr[1].Kind == respError && string(v.Arr[1].Str) == "ERR inner"
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v respValue
			r := bufio.NewReader(strings.NewReader(tc.in + "+next\r\n"))
			if err := readValue(r, &v); err != nil {
				t.Fatalf("readValue(%q): %v", tc.in, err)
			}
			if !tc.check(&v) {
				t.Fatalf("readValue(%q) = %+v", tc.in, v)
			}
			// The reader stops exactly at the end of the reply.
			if err := readValue(r, &v); err != nil || v.Kind != respSimple || string(v.Str) != "next" {
				t.Fatalf("the following reply: %+v, %v", v, err)
			}
		})
	}
}

func TestReadValueErrors(t *testing.T) {
	for _, in := range []string{
		"",                          // EOF
		"+OK\n",                     // LF without CR
		"\r\n",                      // empty line
		"!3\r\nabc\r\n",             // unknown type (RESP3)
		":12a\r\n",                  // bad integer
		":-\r\n",                    // bad integer
		":99999999999999999999\r\n", // overflow
		"$5\r\nabc\r\n",             // truncated bulk
		"$3\r\nabcd\r\n",            // bulk without CRLF at its end
		"$-2\r\n",                   // negative length
		"$999999999999\r\n",         // huge bulk
		"*99999999999\r\n",          // huge array
		"*2\r\n:1\r\n",              // truncated array
		strings.Repeat("*1\r\n", respMaxDepth+1) + ":1\r\n", // too deep
	} {
		var v respValue
		err := readValue(bufio.NewReader(strings.NewReader(in)), &v)
		if err == nil {
			t.Errorf("readValue(%q) = %+v, want an error", in, v)
			continue
		}
		if !errors.Is(err, errProtocol) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("readValue(%q): %v, want a protocol error or EOF", in, err)
		}
	}
}

// TestReadValueReuse reads replies of different shapes into one value, as
// a caller does, and checks nothing of an earlier reply leaks into a later.
func TestReadValueReuse(t *testing.T) {
	r := bufio.NewReader(strings.NewReader("*3\r\n$3\r\nabc\r\n:2\r\n:3\r\n*1\r\n$-1\r\n:7\r\n$2\r\nxy\r\n"))
	var v respValue
	for i, check := range []func() bool{
		func() bool { return len(v.Arr) == 3 && string(v.Arr[0].Str) == "abc" && v.Arr[2].Int == 3 },
		func() bool { return len(v.Arr) == 1 && v.Arr[0].Null && len(v.Arr[0].Str) == 0 },
		func() bool { return v.Kind == respInteger && v.Int == 7 && len(v.Arr) == 0 && !v.Null },
		func() bool { return v.Kind == respBulk && string(v.Str) == "xy" && v.Int == 0 },
	} {
		if err := readValue(r, &v); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if !check() {
			t.Fatalf("reply %d: %+v", i, v)
		}
	}
}

func TestParseRedisTakeRejects(t *testing.T) {
	for _, v := range []respValue{
		{Kind: respInteger, Int: 1},
		{Kind: respArray, Arr: []respValue{{Kind: respInteger}, {Kind: respInteger}}},
		{Kind: respArray, Arr: []respValue{{Kind: respInteger}, {Kind: respBulk}, {Kind: respInteger}}},
	} {
		if _, err := parseRedisTake(&v); !errors.Is(err, errProtocol) {
			t.Errorf("parseRedisTake(%+v) = %v, want a protocol error", v, err)
		}
	}
}

func TestRedisErrorPrefix(t *testing.T) {
	for in, want := range map[string]string{"NOSCRIPT No matching": "NOSCRIPT", "ERR": "ERR", "": ""} {
		if got := redisError(in).prefix(); got != want {
			t.Errorf("redisError(%q).prefix() = %q, want %q", in, got, want)
		}
	}
}

// FuzzReadValue checks that no input makes the decoder panic or return a
// value whose sizes break the bounds it promises.
func FuzzReadValue(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "*3\r\n:1\r\n:2\r\n:0\r\n", "$3\r\nabc\r\n", "*-1\r\n", "-ERR x\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v respValue
		_ = readValue(bufio.NewReader(strings.NewReader(string(data))), &v)
		if len(v.Str) > respMaxBulk+2 || len(v.Arr) > respMaxArray {
			t.Fatalf("value beyond bounds: %d bytes, %d elements", len(v.Str), len(v.Arr))
		}
	})
}
