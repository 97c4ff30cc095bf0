package main

import (
	"fmt"
	"math/rand/v2"
)

// keyDist is how a caller draws key indexes in [0, Keys).
type keyDist uint8

const (
	// distUniform draws every key with the same probability.
	distUniform keyDist = iota
	// distZipf draws key k with probability proportional to
	// 1/(1+k)^zipfS: a few keys are hot, most are cold, as tenants of a
	// real service are.
	distZipf
)

// zipfS is the Zipf exponent of distZipf. Go's generator needs s > 1;
// 1.1 puts about an eighth of the requests on the hottest key of a
// million (1/H(10⁶, 1.1) ≈ 1/8.1).
const zipfS = 1.1

// String returns the name used on command lines and in results.
func (d keyDist) String() string {
	if d == distZipf {
		return "zipf"
	}
	return "uniform"
}

// parseKeyDist reads a distribution name.
func parseKeyDist(s string) (keyDist, error) {
	switch s {
	case "", "uniform":
		return distUniform, nil
	case "zipf":
		return distZipf, nil
	}
	return 0, fmt.Errorf("loadgen: key distribution %q: want uniform or zipf", s)
}

// keyPicker draws the key indexes of one caller. It is used by one
// goroutine; seeds differ per caller so callers do not walk in step.
type keyPicker struct {
	keys int
	rng  uint64 // xorshift64 state, uniform draws
	zipf *rand.Zipf
}

// newKeyPicker returns a picker over keys keys; seed must be non-zero.
func newKeyPicker(d keyDist, keys int, seed uint64) *keyPicker {
	p := &keyPicker{keys: keys, rng: seed * 0x9E3779B97F4A7C15}
	if d == distZipf && keys > 1 {
		p.zipf = rand.NewZipf(rand.New(rand.NewPCG(seed, seed^0xA5A5A5A5)), zipfS, 1, uint64(keys-1))
	}
	return p
}

// next returns the next key index.
func (p *keyPicker) next() int {
	switch {
	case p.keys <= 1:
		return 0
	case p.zipf != nil:
		return int(p.zipf.Uint64())
	}
	p.rng ^= p.rng << 13 // xorshift64
	p.rng ^= p.rng >> 7
	p.rng ^= p.rng << 17
	return int(p.rng % uint64(p.keys))
}
