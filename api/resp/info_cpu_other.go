//go:build !unix

package resp

// cpuSeconds is unknown outside Unix: INFO's cpu section stays empty.
func cpuSeconds() (user, sys float64, ok bool) { return 0, 0, false }
