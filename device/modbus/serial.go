package modbus

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/goburrow/serial"
)

// serialPoll bounds one blocking read of the serial port: how long Close
// waits at most for the reader goroutine to let go of the port.
const serialPoll = 50 * time.Millisecond

// serialConn is an open serial port (github.com/goburrow/serial v0.1.0) with
// what RTU framing needs and that port lacks: reads that honour a deadline
// and end at once when the deadline moves (to abort a request on ctx), and
// a flush of the input received so far. goburrow's port blocks each Read in
// select(2) for its fixed timeout and has no flush; so one goroutine reads
// the port all the time into a buffer, and Read, flush and SetDeadline work
// on that buffer. The goroutine also closes the port, after Close asked, so
// that no read ever runs on a descriptor that was closed (and maybe
// reused).
type serialConn struct {
	port serial.Port

	mu       sync.Mutex
	buf      []byte
	err      error // the reader's terminal error
	deadline time.Time
	stopped  bool
	wake     chan struct{} // one pending wake-up for a waiting Read
	done     chan struct{} // closed when the reader has closed the port
}

// openSerial opens path with the line settings of c.
func openSerial(path string, c Config) (*serialConn, error) {
	p, err := serial.Open(&serial.Config{
		Address:  path,
		BaudRate: c.Baud,
		DataBits: c.DataBits,
		StopBits: c.StopBits,
		Parity:   c.Parity,
		Timeout:  serialPoll,
	})
	if err != nil {
		return nil, fmt.Errorf("open serial port %s: %w", path, err)
	}
	s := &serialConn{port: p, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.reader()
	return s, nil
}

func (s *serialConn) reader() {
	defer close(s.done)
	var b [rtuMaxADU]byte
	for {
		s.mu.Lock()
		stop := s.stopped
		s.mu.Unlock()
		if stop {
			break
		}
		n, err := s.port.Read(b[:])
		if errors.Is(err, serial.ErrTimeout) || errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
			continue
		}
		if err == nil && n == 0 {
			err = io.EOF // readable but nothing to read: the line hung up
		}
		s.mu.Lock()
		s.buf = append(s.buf, b[:n]...)
		if err != nil {
			s.err = fmt.Errorf("serial port: %w", err)
		}
		s.mu.Unlock()
		s.notify()
		if err != nil {
			break
		}
	}
	// The only Close of the port, after the last Read returned.
	_ = s.port.Close() // nothing to do about a failed close of a port we give up
}

func (s *serialConn) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Read returns what the port has received, waiting until something comes,
// the deadline passes (os.ErrDeadlineExceeded, a timeout net.Error), or the
// port fails.
func (s *serialConn) Read(p []byte) (int, error) {
	for {
		s.mu.Lock()
		if len(s.buf) > 0 {
			n := copy(p, s.buf)
			s.buf = s.buf[:copy(s.buf, s.buf[n:])]
			s.mu.Unlock()
			return n, nil
		}
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return 0, err
		}
		if s.stopped {
			s.mu.Unlock()
			return 0, os.ErrClosed
		}
		dl := s.deadline
		s.mu.Unlock()
		if dl.IsZero() {
			<-s.wake
			continue
		}
		wait := time.Until(dl)
		if wait <= 0 {
			return 0, os.ErrDeadlineExceeded
		}
		t := time.NewTimer(wait)
		select {
		case <-s.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// Write sends p whole; the port's descriptor is non-blocking, so a full
// output buffer is waited out.
func (s *serialConn) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := s.port.Write(p[n:])
		if m > 0 {
			n += m
		}
		switch {
		case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR):
			time.Sleep(time.Millisecond)
		case err != nil:
			return n, fmt.Errorf("serial port: %w", err)
		}
	}
	return n, nil
}

// SetDeadline sets the deadline of later and pending Reads (zero: none).
func (s *serialConn) SetDeadline(t time.Time) error {
	s.mu.Lock()
	s.deadline = t
	s.mu.Unlock()
	s.notify()
	return nil
}

// flush discards the input received so far and returns how many bytes it
// dropped, or the port's failure.
func (s *serialConn) flush() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.buf)
	s.buf = s.buf[:0]
	if n == 0 && s.err != nil {
		return 0, s.err
	}
	return n, nil
}

// Close stops the reader and waits (at most serialPoll) until it has closed
// the port. Safe to call twice.
func (s *serialConn) Close() error {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.notify()
	<-s.done
	return nil
}
