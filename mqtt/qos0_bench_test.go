package mqtt

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// fastBroker reads the link's packets on s, answering each PINGREQ with a
// PINGRESP, until s closes.
func fastBroker(s net.Conn) {
	r := bufio.NewReaderSize(s, 1<<16)
	for {
		h, err := r.ReadByte()
		if err != nil {
			return
		}
		n, mul := 0, 1
		for {
			d, err := r.ReadByte()
			if err != nil {
				return
			}
			n += int(d&0x7f) * mul
			mul *= 128
			if d&0x80 == 0 {
				break
			}
		}
		if _, err := r.Discard(n); err != nil {
			return
		}
		if h == 0xc0 {
			if _, err := s.Write([]byte{0xd0, 0}); err != nil {
				return
			}
		}
	}
}

// BenchmarkPublishDirect: one pass of 100 QoS 0 tag values (payloads as
// publishTags makes them) written to a connected link's wire, a broker
// reading them and answering PINGREQs.
func BenchmarkPublishDirect(b *testing.B) {
	ob := newMemOutbox()
	l, err := New(Options{ApplianceID: "edge1", Config: Config{Brokers: []string{"tcp://127.0.0.1:1"}},
		Gateway: &fakeGateway{}, Outbox: ob, Seen: &memSeen{}})
	if err != nil {
		b.Fatal(err)
	}
	c, s := tcpPair(b)
	w := newWire(c, 5*time.Second)
	defer w.Close()
	go fastBroker(s)
	go io.Copy(io.Discard, w) // paho's reader
	l.client, l.wire = openClient{}, w
	pass := make([]Message, 100)
	for i := range pass {
		pass[i] = Message{Topic: fmt.Sprintf("tags/F/T%03d", i),
			Payload: []byte(fmt.Sprintf(`{"v":%d.5,"q":"Good","t":"2026-12-02T15:24:24.123456Z","seq":1796225297000%03d}`, i, i))}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := l.publishDirect(ctx, pass); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if q, _ := ob.Read(0, 1); len(q) > 0 {
		b.Fatalf("values queued while connected: %d", ob.Stats().Depth)
	}
}
