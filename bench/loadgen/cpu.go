package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on
// every Linux configuration Go supports (the kernel reports clock_t in
// USER_HZ whatever its own tick rate).
const userHZ = 100

// procCPU returns the user plus system CPU time that process pid has used,
// read from /proc/PID/stat; pid 0 is this process. Linux only; the
// resolution is 10 ms.
func procCPU(pid int) (time.Duration, error) {
	p := "/proc/self/stat"
	if pid != 0 {
		p = "/proc/" + strconv.Itoa(pid) + "/stat"
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("loadgen: cpu time: %w", err)
	}
	return parseProcStat(b)
}

// parseProcStat reads utime and stime (fields 14 and 15) from the contents
// of a /proc/PID/stat file. The command name, field 2, is in parentheses
// and may itself hold spaces and parentheses, so fields are counted from
// the last ')'.
func parseProcStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("loadgen: cpu time: malformed stat line")
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, errors.New("loadgen: cpu time: short stat line")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("loadgen: cpu time: bad field %q", s)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
