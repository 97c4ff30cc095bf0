package hostile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// respTimeout is the RESP auth and command timeout the RESP cases run
// with (the production default is 10 s).
const respTimeout = time.Second

// respCommand encodes a command as a RESP array of bulk strings.
func respCommand(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	return b
}

// respReply reads one reply and renders it: "+OK", "-ERR ...", ":5",
// "[...]" for arrays, the text for bulk strings.
func respReply(br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply line")
	}
	switch line[0] {
	case '*':
		n, _ := strconv.Atoi(line[1:])
		parts := make([]string, 0, max(n, 0))
		for range n {
			p, err := respReply(br)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return "[" + strings.Join(parts, " ") + "]", nil
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "(nil)", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case ':':
		return line[1:], nil
	}
	return line, nil
}

// respDo sends one command on c and reads its reply within 15 s.
func respDo(c net.Conn, br *bufio.Reader, args ...string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := c.Write(respCommand(args...)); err != nil {
		return "", err
	}
	return respReply(br)
}

// closedWithin reads c until the node closes it and returns how long that
// took, or an error when it is still open after limit.
func closedWithin(c net.Conn, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return 0, fmt.Errorf("still open after %v", limit)
	}
	return time.Since(start), nil
}

// TestRESPUnauthenticated: connections that never authenticate cannot
// hold the Redis port. With --max-conns 64, 64 silent connections take
// every slot, and a real AUTH + WEIR.TAKE is answered once the auth timeout
// cuts them off; half-sent commands are closed at the same timeout and hold
// at most 16 KiB each; a megabyte sent before AUTH is refused at 16 KiB.
func TestRESPUnauthenticated(t *testing.T) {
	respAddr := freeAddr(t)
	extra := []string{
		"--resp-addr", respAddr, "--max-conns", "64",
		"--resp-auth-timeout", respTimeout.String(), "--resp-command-timeout", respTimeout.String(),
	}
	attack(t, extra, func(t *testing.T, n *node, sc scale) {
		silent := make([]net.Conn, 0, 64)
		defer func() {
			for _, c := range silent {
				_ = c.Close()
			}
		}()
		for range 64 {
			c, err := net.DialTimeout("tcp", respAddr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			silent = append(silent, c)
		}
		start := time.Now()
		c, err := net.DialTimeout("tcp", respAddr, 15*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		if got, err := respDo(c, br, "AUTH", canaryToken); got != "+OK" {
			t.Fatalf("AUTH behind 64 silent connections: %q %v", got, err)
		}
		if got, err := respDo(c, br, "WEIR.TAKE", "canary", "resp"); !strings.HasPrefix(got, "[1 ") {
			t.Fatalf("WEIR.TAKE behind 64 silent connections: %q %v", got, err)
		}
		waited := time.Since(start)
		t.Logf("AUTH + WEIR.TAKE answered %v after 64 silent connections filled --max-conns 64 (auth timeout %v)", waited, respTimeout)
		if waited > respTimeout+5*time.Second {
			t.Errorf("a real caller waited %v behind silent connections, want about the %v auth timeout", waited, respTimeout)
		}
		for i, s := range silent {
			if _, err := closedWithin(s, respTimeout+5*time.Second); err != nil {
				t.Fatalf("silent connection %d: %v", i, err)
			}
		}

		// Half-sent commands, in waves under the connection cap: 12 KiB
		// of a command that never ends.
		half := append(respCommand("AUTH", strings.Repeat("x", 4096), strings.Repeat("y", 4096))[:0:0], "*8\r\n"...)
		for range 3 {
			half = append(half, "$4096\r\n"+strings.Repeat("z", 4096)+"\r\n"...)
		}
		half = append(half, "$4096\r\nzz"...)
		var longest time.Duration
		for sent := 0; sent < sc.respConns; {
			wave := min(48, sc.respConns-sent)
			conns := make([]net.Conn, wave)
			for i := range conns {
				if conns[i], err = net.DialTimeout("tcp", respAddr, 15*time.Second); err != nil {
					t.Fatal(err)
				}
				if _, err := conns[i].Write(half); err != nil {
					t.Fatal(err)
				}
			}
			for i, hc := range conns {
				d, err := closedWithin(hc, respTimeout+5*time.Second)
				_ = hc.Close()
				if err != nil {
					t.Fatalf("half-sent command %d: %v", sent+i, err)
				}
				longest = max(longest, d)
			}
			sent += wave
		}
		t.Logf("%d half-sent commands (12 KiB each, unauthenticated) all closed; the last of a wave after %v", sc.respConns, longest)

		// A megabyte before AUTH is refused at 16 KiB.
		big, err := net.DialTimeout("tcp", respAddr, 15*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer big.Close()
		go func() { // ends when the node closes the connection
			_, _ = big.Write(append([]byte("*8\r\n"), []byte(strings.Repeat("$4096\r\n"+strings.Repeat("m", 4096)+"\r\n", 8))...))
		}()
		_ = big.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, _ := bufio.NewReader(big).ReadString('\n')
		if got != "-ERR Protocol error: command over 16384 bytes before AUTH\r\n" {
			t.Fatalf("1 MiB before AUTH: %q", got)
		}
	})
}
