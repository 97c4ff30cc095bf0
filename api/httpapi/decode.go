package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/weir-rl/weir/api"
)

// This file holds the request decoders of the HTTP API. They are plain
// functions of bytes and strings so they can be fuzzed without a server.
// Every error they return is an *Error with CodeInvalid whose detail never
// contains the caller's key.

// inputLimits are the bounds the handler enforces before a Decider sees a
// request.
type inputLimits struct {
	maxKeyBytes int // bytes in a limit name, key or lease holder
	maxChecks   int // checks in one take
}

func invalidf(format string, args ...any) *api.Error {
	return api.Errorf(api.CodeInvalid, format, args...)
}

// wireCheck is one check as JSON. Cost is a pointer to tell an omitted cost
// (default 1) from an explicit 0 (invalid).
type wireCheck struct {
	Limit string `json:"limit"`
	Key   string `json:"key"`
	Cost  *int64 `json:"cost"`
	// Inline is an inline limit (inline.go); nil for a limit of the file.
	Inline *wireInline `json:"inline"`
}

type wireTakeRequest struct {
	Checks []wireCheck `json:"checks"`
	// Evidence asks for each result's evidence (Evidence).
	Evidence bool `json:"evidence"`
	// Headers asks for the rate-limit header fields (takeOptions).
	Headers bool `json:"headers"`
}

// takeOptions are what a take asks for beside its decision, each off
// unless the body sets it to true.
type takeOptions struct {
	// evidence: each result carries its evidence ("evidence":true).
	evidence bool
	// headers: the answer carries the rate-limit header fields of the
	// result api.HeaderResult picks ("headers":true), for a caller that
	// passes them on to its own client. Off by default: the body holds
	// every figure, and each field costs the caller a parse on every take.
	headers bool
}

type wireAcquireRequest struct {
	Limit  string `json:"limit"`
	Key    string `json:"key"`
	Holder string `json:"holder"`
	TTLMs  int64  `json:"ttl_ms"`
	WaitMs int64  `json:"wait_ms"`
	// Evidence asks for the decision's source in the answer.
	Evidence bool `json:"evidence"`
}

type wireRenewRequest struct {
	TTLMs int64 `json:"ttl_ms"`
}

// decodeTakeRequest decodes and validates the body of POST /v1/take.
// An omitted or null cost is 1; unknown fields, trailing data and numbers
// that are not integers (1.5, "1", 1e3) are invalid. The common shape is
// read by decodeTakeFast, without reflection; anything else by
// decodeTakeRequestJSON, with the same result.
func decodeTakeRequest(body []byte, lim inputLimits) ([]api.Check, takeOptions, error) {
	if checks, opts, ok := decodeTakeFast(body, lim); ok {
		return checks, opts, nil
	}
	return decodeTakeRequestJSON(body, lim)
}

// decodeTakeRequestJSON is decodeTakeRequest through encoding/json: the
// reference that decodeTakeFast must agree with, and the source of every
// error message.
func decodeTakeRequestJSON(body []byte, lim inputLimits) ([]api.Check, takeOptions, error) {
	var w wireTakeRequest
	if e := decodeJSON(body, &w); e != nil {
		return nil, takeOptions{}, e
	}
	// Bound the count before allocating for it.
	if len(w.Checks) > lim.maxChecks {
		return nil, takeOptions{}, invalidf("checks has %d entries, over the %d maximum", len(w.Checks), lim.maxChecks)
	}
	checks := make([]api.Check, len(w.Checks))
	for i, c := range w.Checks {
		checks[i] = api.Check{Limit: c.Limit, Key: c.Key, Cost: 1, Inline: c.Inline.inlineOf()}
		if c.Cost != nil {
			checks[i].Cost = *c.Cost
		}
	}
	if err := api.ValidateChecks(checks, lim.maxKeyBytes, lim.maxChecks); err != nil {
		return nil, takeOptions{}, err
	}
	return checks, takeOptions{evidence: w.Evidence, headers: w.Headers}, nil
}

// checkQuery is a decoded GET /v1/check: the check, and how a denial is
// answered.
type checkQuery struct {
	api.Check
	// denyStatus is the status of a denial: 429 unless the proxy asked for
	// 401 or 403 (nginx's auth_request accepts nothing else as a refusal).
	denyStatus int
}

// Forward-auth parameters of GET /v1/check; see decodeCheckQuery.
const (
	checkDenyStatusParam = "deny_status"
	checkKeyHeaderParam  = "key_header"
	xForwardedFor        = "X-Forwarded-For"
)

// decodeCheckQuery decodes and validates the query of GET /v1/check:
// limit exactly once, cost at most once (default 1), and the key either from
// key (exactly once) or from the request header that key_header names (see
// keyFromHeader); deny_status, at most once, is 401, 403 or 429 (the
// default). Other parameters are ignored, since proxies may add their own.
func decodeCheckQuery(rawQuery string, header http.Header, lim inputLimits) (checkQuery, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return checkQuery{}, invalidf("malformed query string")
	}
	one := func(name string, required bool) (string, *api.Error) {
		v := q[name]
		switch {
		case len(v) > 1:
			return "", invalidf("%s is given %d times", name, len(v))
		case len(v) == 0 && required:
			return "", invalidf("%s is missing", name)
		case len(v) == 0:
			return "", nil
		}
		return v[0], nil
	}
	c := checkQuery{Check: api.Check{Cost: 1}, denyStatus: http.StatusTooManyRequests}
	var e *api.Error
	if c.Limit, e = one("limit", true); e != nil {
		return checkQuery{}, e
	}
	keyHeader, e := one(checkKeyHeaderParam, false)
	if e != nil {
		return checkQuery{}, e
	}
	if _, given := q[checkKeyHeaderParam]; given {
		if _, both := q["key"]; both {
			return checkQuery{}, invalidf("key and %s are both given; use one", checkKeyHeaderParam)
		}
		if c.Key, e = keyFromHeader(header, keyHeader); e != nil {
			return checkQuery{}, e
		}
	} else if c.Key, e = one("key", true); e != nil {
		return checkQuery{}, e
	}
	cost, e := one("cost", false)
	if e != nil {
		return checkQuery{}, e
	}
	if _, given := q["cost"]; given {
		n, err := strconv.ParseInt(cost, 10, 64)
		if err != nil || n < 1 {
			return checkQuery{}, invalidf("cost must be a positive integer")
		}
		c.Cost = n
	}
	deny, e := one(checkDenyStatusParam, false)
	if e != nil {
		return checkQuery{}, e
	}
	switch deny {
	case "":
		if _, given := q[checkDenyStatusParam]; given {
			return checkQuery{}, invalidf("%s must be 401, 403 or 429", checkDenyStatusParam)
		}
	case "401":
		c.denyStatus = http.StatusUnauthorized
	case "403":
		c.denyStatus = http.StatusForbidden
	case "429":
	default:
		return checkQuery{}, invalidf("%s must be 401, 403 or 429", checkDenyStatusParam)
	}
	if err := api.ValidateField("limit", c.Limit, lim.maxKeyBytes); err != nil {
		return checkQuery{}, err
	}
	if err := api.ValidateField("key", c.Key, lim.maxKeyBytes); err != nil {
		return checkQuery{}, err
	}
	return c, nil
}

// credentialHeaders are the headers key_header may not name, by canonical
// name: each carries a credential (the caller's Weir token, the client's
// own Authorization a forward-auth proxy passes through, its cookies), and
// a bucket key is not a secret: hot keys list it to any read token. The
// table is never modified.
var credentialHeaders = map[string]bool{
	"Authorization":       true,
	"Proxy-Authorization": true,
	TokenHeader:           true,
	"Cookie":              true,
}

// keyFromHeader returns the key that a forward-auth proxy put in the request
// header name. For X-Forwarded-For it is the last address of the last field
// line: the one the proxy in front of Weir appended (or set) from the
// connection, the only element a proxy vouches for; everything before it
// came from the client. Any other header must appear exactly once and its
// whole value, trimmed, is the key: the proxy must set it itself (an
// identity it authenticated), replacing whatever the client sent. The
// detail names the header, never its value.
func keyFromHeader(h http.Header, name string) (string, *api.Error) {
	if name == "" || len(name) > 128 {
		return "", invalidf("%s must name a request header", checkKeyHeaderParam)
	}
	if credentialHeaders[http.CanonicalHeaderKey(name)] {
		return "", invalidf("%s may not name %s: it carries a credential, which would become a bucket key (shown by /v1/cluster/hot)",
			checkKeyHeaderParam, http.CanonicalHeaderKey(name))
	}
	vals := h.Values(name)
	if len(vals) == 0 {
		return "", invalidf("header %q named by %s is missing", api.Clip(name), checkKeyHeaderParam)
	}
	if http.CanonicalHeaderKey(name) == xForwardedFor {
		last := vals[len(vals)-1]
		if i := strings.LastIndexByte(last, ','); i >= 0 {
			last = last[i+1:]
		}
		return strings.TrimSpace(last), nil
	}
	if len(vals) > 1 {
		return "", invalidf("header %q named by %s is given %d times", api.Clip(name), checkKeyHeaderParam, len(vals))
	}
	return strings.TrimSpace(vals[0]), nil
}

// decodeAcquireRequest decodes and validates the body of POST /v1/leases and
// reports whether it asks for evidence.
func decodeAcquireRequest(body []byte, lim inputLimits) (api.AcquireRequest, bool, error) {
	var w wireAcquireRequest
	if e := decodeJSON(body, &w); e != nil {
		return api.AcquireRequest{}, false, e
	}
	req, err := api.NewAcquireRequest(w.Limit, w.Key, w.Holder, w.TTLMs, w.WaitMs, lim.maxKeyBytes)
	return req, w.Evidence, err
}

// decodeRenewRequest decodes the optional body of POST /v1/leases/{id}/renew.
// An empty body means ttl 0: the limit's lease_ttl.
func decodeRenewRequest(body []byte) (time.Duration, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return 0, nil
	}
	var w wireRenewRequest
	if e := decodeJSON(body, &w); e != nil {
		return 0, e
	}
	return api.Milliseconds("ttl_ms", w.TTLMs)
}

// decodeJSON decodes exactly one JSON value into v, rejecting unknown fields
// (a misspelt "cost" must not silently charge 1) and trailing data.
func decodeJSON(body []byte, v any) *api.Error {
	if !validJSONText(body) {
		return invalidf("request body is not valid UTF-8 (or holds an unpaired surrogate escape)")
	}
	if e := fieldNames(body); e != nil {
		return e
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalidf("trailing data after the JSON value")
	}
	return nil
}

// jsonError turns a decoding error into a detail that is useful but does not
// quote the body at length (the body holds the caller's key).
func jsonError(err error) *api.Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return invalidf("request body is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalidf("malformed JSON: unexpected end of input")
	case errors.As(err, &syn):
		return invalidf("malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return invalidf("request body must be a JSON object")
		}
		return invalidf("%s: want %s, got %s", typ.Field, jsonKind(typ.Type), api.Clip(typ.Value))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return invalidf("unknown field %s", api.Clip(name))
	}
	return invalidf("malformed JSON")
}

// jsonKind names what a Go type expects in JSON words.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another type"
}

// decodeClusterQuery decodes the optional limit and key of GET /v1/cluster.
// Both or neither must be given.
func decodeClusterQuery(rawQuery string, lim inputLimits) (limit, key string, err error) {
	q, perr := url.ParseQuery(rawQuery)
	if perr != nil {
		return "", "", invalidf("malformed query string")
	}
	limit, key = q.Get("limit"), q.Get("key")
	if limit == "" && key == "" {
		return "", "", nil
	}
	if err := api.ValidateField("limit", limit, lim.maxKeyBytes); err != nil {
		return "", "", err
	}
	if err := api.ValidateField("key", key, lim.maxKeyBytes); err != nil {
		return "", "", err
	}
	return limit, key, nil
}
