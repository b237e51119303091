//go:build !linux

package modbus

import "net"

// flushSocket cannot discard a socket's pending input without blocking on
// this platform: it does nothing, and RTU over TCP relies on the frame
// checks alone (see flush_linux.go).
func flushSocket(c net.Conn) (int, error) { return 0, nil }
