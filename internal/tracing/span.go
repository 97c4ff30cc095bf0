package tracing

import (
	"go.opentelemetry.io/otel/codes"

	"github.com/weir-rl/weir/api"
)

// sourceForward is the source of a decision its owner made elsewhere.
const sourceForward = "forward"

// EndTake ends a decision span with the take's outcome: its first
// limit, number of checks, whether it was allowed and who decided
// (owner here, forward to an owner elsewhere, fallback, allotment).
func (s Span) EndTake(checks []api.Check, resp api.TakeResponse, err error) {
	if s.s == nil {
		return
	}
	if len(checks) > 0 {
		s.s.SetAttributes(AttrLimit.String(checks[0].Limit))
	}
	s.s.SetAttributes(AttrChecks.Int(len(checks)))
	if err == nil {
		src := sourceForward
		if len(resp.Results) > 0 && (!resp.Forwarded || resp.Results[0].Source != api.SourceOwner) {
			src = resp.Results[0].Source.String()
		}
		s.s.SetAttributes(AttrAllowed.Bool(resp.Allowed), AttrSource.String(src))
	}
	s.fail(err)
	s.s.End()
}

// EndForward ends a forward span: err is the transport's (the owner was
// not reached), notOwner the owner's ring disagreeing.
func (s Span) EndForward(err error, notOwner bool) {
	if s.s == nil {
		return
	}
	if notOwner {
		s.s.SetAttributes(AttrNotOwner.Bool(true))
	}
	s.fail(err)
	s.s.End()
}

// EndOwner ends an owner span with the step's outcome: whether it
// admitted what it was asked (a take every check, an acquire its permit,
// an allotment some tokens), the owner's ring disagreeing, and the detail
// of its semantic error ("" for none; an api.Error detail, which never
// holds a key).
func (s Span) EndOwner(checks []api.Check, allowed, notOwner bool, errDetail string) {
	if s.s == nil {
		return
	}
	if len(checks) > 0 {
		s.s.SetAttributes(AttrLimit.String(checks[0].Limit), AttrChecks.Int(len(checks)))
	}
	s.s.SetAttributes(AttrAllowed.Bool(allowed), AttrSource.String(api.SourceOwner.String()))
	if notOwner {
		s.s.SetAttributes(AttrNotOwner.Bool(true))
	}
	if errDetail != "" {
		s.s.SetStatus(codes.Error, errDetail)
	}
	s.s.End()
}
