package modbus

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// flushSocket discards the bytes waiting in c's receive buffer without
// blocking (recv with MSG_DONTWAIT until EAGAIN) and returns how many it
// dropped; io.EOF when the peer has closed the connection. RTU over TCP has
// no transaction id, so a late answer left in the socket would otherwise be
// read as the answer to the next request (Modbus over Serial Line V1.02
// §2.5.1: RTU frames are matched by order alone).
func flushSocket(c net.Conn) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("flush: %w", err)
	}
	var (
		n    int
		rerr error
		buf  [512]byte
	)
	err = rc.Read(func(fd uintptr) bool {
		for {
			m, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_DONTWAIT)
			switch {
			case m > 0:
				n += m
				continue
			case err == nil:
				rerr = io.EOF
			case errors.Is(err, syscall.EINTR):
				continue
			case errors.Is(err, syscall.EAGAIN):
			default:
				rerr = err
			}
			return true
		}
	})
	if err != nil {
		return n, fmt.Errorf("flush: %w", err)
	}
	return n, rerr
}
