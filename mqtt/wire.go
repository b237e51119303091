package mqtt

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// The wire (docs/mqtt.md, "Writes"): the link dials the broker itself
// (paho's custom connection function) and hands paho a connection whose
// writes never wait for the socket. A write is copied to a pending buffer
// and a writer goroutine sends whatever is pending in one system call:
// the first write after an idle spell goes out at once (the writer is
// woken, nothing waits for more), and what comes while a system call is
// in progress goes out together in the next one. Nothing is ever held
// back to coalesce. paho writes every packet in one Write call, so
// packets never interleave; the link's QoS 0 tag values are encoded
// straight into the same buffer (writePublish0), without paho's
// per-message goroutine hops.
//
// The wire also says how far the broker has read: it counts the bytes
// written (the stream's offset), notes the offset just past every PINGREQ
// (paho's keep-alive, or one the link asks for: ping), and follows the
// packets the broker sends; a PINGRESP answers the oldest PINGREQ
// outstanding (MQTT 3.1.1 §3.12, §3.13), so the broker has read every
// byte before it (confirmedAt). That is the only receipt a QoS 0 publish
// gets.

// maxPending is how much the pending buffer holds before a write waits
// for the writer.
const maxPending = 4 << 20

// errWireClosed is the error of a write on a wire that is closed or that
// failed.
var errWireClosed = errors.New("mqtt: connection closed")

// wire is a net.Conn whose writes are coalesced by a writer goroutine.
type wire struct {
	net.Conn
	timeout time.Duration // write deadline of each system call

	mu      sync.Mutex
	cond    *sync.Cond // signalled when pending shrinks or the wire ends
	pending []byte
	spare   []byte
	err     error // the first write error, or errWireClosed once closed
	closing bool
	wake    chan struct{}
	done    chan struct{}

	off       uint64        // bytes written so far: the stream offset of the next packet
	pings     []uint64      // the offset just past each PINGREQ written and not yet answered, oldest first
	confirmed uint64        // the broker has read every byte before this offset (a PINGRESP came)
	pongc     chan struct{} // signalled on every PINGRESP

	rx rxScan // the reader's place in the broker's packets (paho's reader only)
}

// rxScan follows packet boundaries in what the broker sends (MQTT 3.1.1
// §2.2: a fixed header byte, the remaining length in one to four bytes of
// seven bits each, then that many bytes).
type rxScan struct {
	typ    byte // the fixed header's first byte
	inLen  bool // reading the remaining length
	length int
	shift  uint
	body   int // bytes of the packet still to come
}

// pingreq is a PINGREQ packet (MQTT 3.1.1 §3.12).
var pingreq = [2]byte{0xc0, 0}

func newWire(c net.Conn, timeout time.Duration) *wire {
	w := &wire{Conn: c, timeout: timeout, wake: make(chan struct{}, 1), done: make(chan struct{}), pongc: make(chan struct{}, 1)}
	w.cond = sync.NewCond(&w.mu)
	go w.writer()
	return w
}

// Write queues b for the writer; it waits only while the pending buffer
// is full. An error of an earlier system call is returned here.
func (w *wire) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.err == nil && !w.closing && len(w.pending) >= maxPending {
		w.cond.Wait()
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.closing {
		return 0, errWireClosed
	}
	w.pending = append(w.pending, b...)
	w.off += uint64(len(b))
	if len(b) == 2 && b[0] == pingreq[0] && b[1] == pingreq[1] { // paho's keep-alive
		w.pings = append(w.pings, w.off)
	}
	w.kick()
	return len(b), nil
}

// ping writes a PINGREQ, unless one is outstanding (then its answer will
// do) or the wire is closed or failed; it reports whether it wrote one.
// The broker's PINGRESP moves confirmedAt past everything written before.
func (w *wire) ping() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || w.closing || len(w.pings) > 0 {
		return false
	}
	w.pending = append(w.pending, pingreq[:]...)
	w.off += uint64(len(pingreq))
	w.pings = append(w.pings, w.off)
	w.kick()
	return true
}

// confirmedAt is the stream offset before which the broker has read
// every byte: the end of the last PINGREQ it answered (0: none yet).
func (w *wire) confirmedAt() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.confirmed
}

// Read reads from the connection (paho's reader) and follows the packets
// read, for the PINGRESPs.
func (w *wire) Read(b []byte) (int, error) {
	n, err := w.Conn.Read(b)
	if n > 0 {
		w.scan(b[:n])
	}
	return n, err
}

// scan follows the packets in b, the next bytes the broker sent; a
// PINGRESP (type 13, no remaining bytes) confirms the oldest PINGREQ
// outstanding.
func (w *wire) scan(b []byte) {
	r := &w.rx
	for len(b) > 0 {
		switch {
		case r.body > 0:
			k := min(r.body, len(b))
			r.body -= k
			b = b[k:]
		case !r.inLen:
			r.typ, r.inLen, r.length, r.shift = b[0], true, 0, 0
			b = b[1:]
		default:
			d := b[0]
			b = b[1:]
			if r.shift < 28 {
				r.length |= int(d&0x7f) << r.shift
			}
			r.shift += 7
			if d&0x80 == 0 {
				r.inLen, r.body = false, r.length
				if r.typ == 0xd0 && r.length == 0 {
					w.pong()
				}
			}
		}
	}
}

// pong records a PINGRESP: the oldest PINGREQ outstanding was answered.
func (w *wire) pong() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pings) == 0 {
		return
	}
	w.confirmed = w.pings[0]
	w.pings = append(w.pings[:0], w.pings[1:]...)
	select {
	case w.pongc <- struct{}{}:
	default:
	}
}

// writePublish0 queues a PUBLISH packet at QoS 0 (MQTT 3.1.1 §3.3) on
// the topic base/topic with payload and returns the stream offset just
// past it (the broker read it once confirmedAt reaches that). It fails
// when the wire is closed or failed, so the caller can queue the message
// instead.
func (w *wire) writePublish0(base, topic string, retain bool, payload []byte) (uint64, error) {
	tl := len(base) + 1 + len(topic)
	if tl > 0xffff {
		return 0, errors.New("mqtt: topic too long")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.err == nil && !w.closing && len(w.pending) >= maxPending {
		w.cond.Wait()
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.closing {
		return 0, errWireClosed
	}
	start := len(w.pending)
	h := byte(0x30)
	if retain {
		h |= 1
	}
	n := 2 + tl + len(payload)
	w.pending = append(w.pending, h)
	for {
		d := byte(n % 128)
		n /= 128
		if n > 0 {
			d |= 0x80
		}
		w.pending = append(w.pending, d)
		if n == 0 {
			break
		}
	}
	w.pending = append(w.pending, byte(tl>>8), byte(tl))
	w.pending = append(w.pending, base...)
	w.pending = append(w.pending, '/')
	w.pending = append(w.pending, topic...)
	w.pending = append(w.pending, payload...)
	w.off += uint64(len(w.pending) - start)
	w.kick()
	return w.off, nil
}

// kick wakes the writer (w.mu held).
func (w *wire) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// writer sends what is pending, all of it in one system call, until the
// wire is closed (after sending what was pending then) or a call fails.
func (w *wire) writer() {
	defer close(w.done)
	for {
		w.mu.Lock()
		for len(w.pending) == 0 && !w.closing {
			w.mu.Unlock()
			<-w.wake
			w.mu.Lock()
		}
		if len(w.pending) == 0 { // closing, everything sent
			w.mu.Unlock()
			return
		}
		buf := w.pending
		w.pending = w.spare[:0]
		w.cond.Broadcast()
		w.mu.Unlock()
		if w.timeout > 0 {
			w.Conn.SetWriteDeadline(time.Now().Add(w.timeout))
		}
		_, err := w.Conn.Write(buf)
		w.mu.Lock()
		if cap(buf) <= maxPending*2 {
			w.spare = buf[:0]
		}
		if err != nil {
			if w.err == nil {
				w.err = err
			}
			w.pending = nil
			w.cond.Broadcast()
			w.mu.Unlock()
			w.Conn.Close() // paho's reader sees it: the connection is lost
			return
		}
		w.mu.Unlock()
	}
}

// Close sends what is pending (within the write timeout), then closes the
// connection. paho closes the connection right after writing DISCONNECT;
// that packet still goes out.
func (w *wire) Close() error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return nil
	}
	w.closing = true
	w.cond.Broadcast()
	w.kick()
	w.mu.Unlock()
	select {
	case <-w.done:
	case <-time.After(w.timeout + time.Second):
	}
	w.mu.Lock()
	if w.err == nil {
		w.err = errWireClosed
	}
	w.mu.Unlock()
	return w.Conn.Close()
}

// SetDeadline sets the read deadline only: writes have the wire's own
// (paho sets one around every packet it writes; here that packet is only
// copied).
func (w *wire) SetDeadline(t time.Time) error { return w.Conn.SetReadDeadline(t) }

// SetWriteDeadline is ignored: every system call of the writer has the
// wire's write timeout.
func (w *wire) SetWriteDeadline(time.Time) error { return nil }

// dialer opens the connections of the link's paho clients: TCP for tcp://
// and mqtt://, TLS with the link's config for ssl://, tls:// and
// mqtts://, each wrapped in a wire that got is called with once the
// connection is open.
func dialer(tc *tls.Config, connectTimeout, writeTimeout time.Duration, got func(*wire)) paho.OpenConnectionFunc {
	return func(u *url.URL, _ paho.ClientOptions) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		d := &net.Dialer{}
		var c net.Conn
		var err error
		switch u.Scheme {
		case "tcp", "mqtt":
			c, err = d.DialContext(ctx, "tcp", u.Host)
		case "ssl", "tls", "mqtts", "tcps":
			cfg := &tls.Config{}
			if tc != nil {
				cfg = tc.Clone()
			}
			td := &tls.Dialer{NetDialer: d, Config: cfg}
			c, err = td.DialContext(ctx, "tcp", u.Host)
		default:
			return nil, errors.New("mqtt: unsupported broker scheme " + u.Scheme)
		}
		if err != nil {
			return nil, err
		}
		w := newWire(c, writeTimeout)
		got(w)
		return w, nil
	}
}
