package mqtt

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// acceptAndDrop is a broker that answers every CONNECT with a CONNACK
// (accepted, MQTT 3.1.1 §3.2) and closes the connection at once, as a
// broker does to a client whose id another client takes over, or after a
// packet it refuses. It counts the connections.
func acceptAndDrop(t *testing.T) (url string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func(c net.Conn) {
				defer c.Close()
				var hdr [2]byte // CONNECT: type byte, remaining length (< 128 here)
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				if _, err := io.CopyN(io.Discard, c, int64(hdr[1])); err != nil {
					return
				}
				c.Write([]byte{0x20, 0x02, 0x00, 0x00})
			}(c)
		}
	}()
	return "tcp://" + ln.Addr().String(), conns
}

// TestConnectLoop_BacksOffFromABrokerThatDropsEachConnection: connections
// the broker closes right after accepting them are reconnected after the
// backoff, doubling from BackoffMin, not as fast as the broker drops them.
// With 100 ms doubling to 1 s, 1.5 s hold at most 7 connections (0, then
// after at least 50, 100, 200, 400 and 500 ms); without the backoff the link
// made thousands.
func TestConnectLoop_BacksOffFromABrokerThatDropsEachConnection(t *testing.T) {
	url, conns := acceptAndDrop(t)
	l, err := New(Options{ApplianceID: "edge1", Config: Config{Brokers: []string{url}},
		Gateway: &fakeGateway{}, Outbox: newMemOutbox(), Seen: &memSeen{},
		BackoffMin: 100 * time.Millisecond, BackoffMax: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := conns.Load()
	if n < 2 {
		t.Fatalf("%d connections: the link did not reconnect after the broker closed the first", n)
	}
	if n > 7 {
		t.Errorf("%d connections in 1.5 s to a broker that drops each one: want at most 7 (backoff from 100 ms, doubling)", n)
	}
}

// TestConnectLoop_FailsOverFromABrokerThatDropsEachConnection: docs/mqtt.md
// (brokers): "a lost connection is tried again on the same broker first,
// then on the next". A first broker that accepts every connection and
// closes it at once must not hold the link for ever: once its connection
// was lost twice in a row, the second broker of the list is tried.
func TestConnectLoop_FailsOverFromABrokerThatDropsEachConnection(t *testing.T) {
	urlA, connsA := acceptAndDrop(t)
	urlB, connsB := acceptAndDrop(t)
	l, err := New(Options{ApplianceID: "edge1", Config: Config{Brokers: []string{urlA, urlB}},
		Gateway: &fakeGateway{}, Outbox: newMemOutbox(), Seen: &memSeen{},
		BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer l.Stop(context.Background())
	for deadline := time.Now().Add(20 * time.Second); connsA.Load() < 6 && connsB.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if a, b := connsA.Load(), connsB.Load(); b == 0 {
		t.Fatalf("the first broker dropped %d connections in a row and the second was never tried", a)
	}
}
