//go:build unix

package client

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the member closed nc (or sent something
// unasked, which breaks the framing as surely): a non-blocking peek at the
// socket finds an end of file or data where an idle connection has
// neither. It cannot tell for a connection without a file descriptor, and
// then says no.
func peerClosed(nc net.Conn) bool {
	if u, ok := nc.(interface{ NetConn() net.Conn }); ok { // TLS: peek at the TCP connection under it
		nc = u.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n > 0 || (n == 0 && rerr == nil) || (rerr != nil && !errors.Is(rerr, syscall.EAGAIN) && !errors.Is(rerr, syscall.EINTR))
		return true
	})
	return closed || err != nil
}
