//go:build unix

package resp

import "syscall"

// cpuSeconds is the process's user and system CPU time, in seconds.
func cpuSeconds() (user, sys float64, ok bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0, false
	}
	sec := func(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
	return sec(ru.Utime), sec(ru.Stime), true
}
