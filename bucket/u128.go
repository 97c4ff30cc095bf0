package bucket

import "math/bits"

// u128 is an unsigned 128-bit integer. The algorithms keep every product of
// a count and a duration in one, so no rate or capacity within the
// validated bounds can overflow, and no float ever enters a decision.
type u128 struct{ hi, lo uint64 }

// mul multiplies two 64-bit values into a 128-bit one.
func mul(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

// add returns x+y, saturating at the maximum.
func (x u128) add(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, c2 := bits.Add64(x.hi, y.hi, c)
	if c2 != 0 {
		return u128{^uint64(0), ^uint64(0)}
	}
	return u128{hi, lo}
}

// add64 returns x+y, saturating at the maximum.
func (x u128) add64(y uint64) u128 { return x.add(u128{0, y}) }

// sub returns x-y, or zero when y > x.
func (x u128) sub(y u128) u128 {
	if x.less(y) {
		return u128{}
	}
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	hi, _ := bits.Sub64(x.hi, y.hi, b)
	return u128{hi, lo}
}

// less reports x < y.
func (x u128) less(y u128) bool {
	return x.hi < y.hi || (x.hi == y.hi && x.lo < y.lo)
}

// divmod returns x/d and x%d. A quotient that does not fit in 64 bits
// saturates at the maximum uint64 (with remainder 0). d must not be zero.
func (x u128) divmod(d uint64) (q, r uint64) {
	if x.hi >= d {
		return ^uint64(0), 0
	}
	return bits.Div64(x.hi, x.lo, d)
}

// divCeil returns ceil(x/d), saturating like divmod.
func (x u128) divCeil(d uint64) uint64 {
	q, r := x.divmod(d)
	if r != 0 && q != ^uint64(0) {
		q++
	}
	return q
}

// satAdd returns t+d for an instant t and a non-negative span d (both in
// nanoseconds), saturating at the largest int64.
func satAdd(t int64, d uint64) int64 {
	if d > uint64(maxInt64) {
		return maxInt64
	}
	s := t + int64(d)
	if s < t {
		return maxInt64
	}
	return s
}

// span returns b-a as a non-negative span, zero when b <= a. It does not
// overflow for any pair of int64 instants.
func span(a, b int64) uint64 {
	if b <= a {
		return 0
	}
	return uint64(b) - uint64(a)
}

// dur converts a span to a Duration, saturating at the largest Duration.
func dur(n uint64) int64 {
	if n > uint64(maxInt64) {
		return maxInt64
	}
	return int64(n)
}

const maxInt64 = int64(^uint64(0) >> 1)
