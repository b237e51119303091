package mqtt

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// linkClient is a paho client for runConnection: connected, disconnect
// does nothing, and a publish completes at once (with an error when nack)
// or, silent, never (a broker that reads nothing acknowledges nothing).
type linkClient struct {
	paho.Client
	nack, silent bool
}

func (linkClient) IsConnectionOpen() bool { return true }
func (linkClient) Disconnect(uint)        {}
func (c linkClient) Publish(string, byte, bool, any) paho.Token {
	switch {
	case c.silent:
		return silentToken{}
	case c.nack:
		return doneToken{errors.New("not acknowledged")}
	}
	return doneToken{}
}

// silentToken is a paho token that never completes.
type silentToken struct{ paho.Token }

func (silentToken) WaitTimeout(time.Duration) bool { return false }
func (silentToken) Done() <-chan struct{}          { return nil }

// doneToken is a completed paho token.
type doneToken struct{ err error }

func (doneToken) Wait() bool                     { return true }
func (doneToken) WaitTimeout(time.Duration) bool { return true }
func (doneToken) Done() <-chan struct{}          { c := make(chan struct{}); close(c); return c }
func (t doneToken) Error() error                 { return t.err }

// connected is a link whose connection runs on a TCP pair over the wire
// (runConnection, as connectLoop after a CONNACK): it returns the link,
// its outbox, the broker's end, the wire, the connection's lost channel
// (paho's connection-lost handler) and a channel closed when
// runConnection returned. A goroutine reads the wire as paho's reader
// does.
func connected(t *testing.T, ctx context.Context, c paho.Client) (*Link, *memOutbox, net.Conn, *wire, chan error, chan struct{}) {
	t.Helper()
	ob := newMemOutbox()
	l, err := New(Options{ApplianceID: "edge1", Config: Config{Brokers: []string{"tcp://127.0.0.1:1"}},
		Gateway: &fakeGateway{}, Outbox: ob, Seen: &memSeen{}})
	if err != nil {
		t.Fatal(err)
	}
	cc, s := tcpPair(t)
	w := newWire(cc, 5*time.Second)
	go func() {
		for {
			if _, err := packets.ReadPacket(w); err != nil {
				return
			}
		}
	}()
	l.q0.spacing = 0 // a PINGREQ after every pass unless one is outstanding
	lost := make(chan error, 1)
	done := make(chan struct{})
	go func() { defer close(done); l.runConnection(ctx, c, w, "tcp://broker", lost) }()
	for deadline := time.Now().Add(5 * time.Second); !l.State().Connected; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("runConnection did not take the connection")
		}
	}
	return l, ob, s, w, lost, done
}

func tagMsgs(prefix string, n int) []Message {
	out := make([]Message, n)
	for i := range out {
		out[i] = Message{Topic: fmt.Sprintf("tags/%s%d", prefix, i), Payload: []byte(fmt.Sprintf("%s%d", prefix, i))}
	}
	return out
}

func payloads(q []Queued) []string {
	out := make([]string, len(q))
	for i, m := range q {
		out[i] = string(m.Payload)
	}
	return out
}

// TestPublishDirect_WrittenButUnreadWhenTheConnectionIsLostIsQueued: a
// QoS 0 message is written to a connection whose writes still succeed
// while the broker is going away (https://github.com/eclipse-paho/paho.mqtt.golang/issues/630:
// no acknowledgement exists at QoS 0); the broker never reads it and the
// connection is lost. The message is then in the outbox (at QoS 1, in
// order), not lost.
func TestPublishDirect_WrittenButUnreadWhenTheConnectionIsLostIsQueued(t *testing.T) {
	l, ob, s, _, lost, done := connected(t, context.Background(), linkClient{silent: true})
	if err := l.publishDirect(context.Background(), tagMsgs("a", 3)); err != nil {
		t.Fatal(err)
	}
	if q, _ := ob.Read(0, 10); len(q) != 0 {
		t.Fatalf("queued while connected: %v", payloads(q))
	}
	s.Close() // the broker stops without reading
	lost <- errors.New("EOF")
	<-done
	q, _ := ob.Read(0, 10)
	if got := fmt.Sprint(payloads(q)); got != "[a0 a1 a2]" || q[0].Topic != "qubiq/v1/edge1/tags/a0" {
		t.Fatalf("queued after the connection was lost: %s, want [a0 a1 a2]", got)
	}
	// On the next connection their topics wait behind them (order per
	// topic); another topic goes straight out.
	c2, _ := tcpPair(t)
	l.client, l.wire = openClient{}, newWire(c2, 5*time.Second)
	if err := l.publishDirect(context.Background(), []Message{tagMsgs("a", 1)[0], {Topic: "tags/c0", Payload: []byte("c0")}}); err != nil {
		t.Fatal(err)
	}
	if q, _ := ob.Read(0, 10); fmt.Sprint(payloads(q)) != "[a0 a1 a2 a0]" {
		t.Fatalf("queued %v, want the new a0 behind the others, c0 not queued", payloads(q))
	}
}

// broker reads the link's packets on s and answers each PINGREQ with a
// PINGRESP once the test sends on pongs (closed: it stops); it sends the
// payloads of the publishes it read on got.
func broker(s net.Conn, pongs <-chan struct{}, got chan<- string) {
	r := bufio.NewReader(s)
	for {
		cp, err := packets.ReadPacket(r)
		if err != nil {
			return
		}
		switch p := cp.(type) {
		case *packets.PublishPacket:
			got <- string(p.Payload)
		case *packets.PingreqPacket:
			if _, ok := <-pongs; !ok {
				return
			}
			if err := packets.NewControlPacket(packets.Pingresp).Write(s); err != nil {
				return
			}
		}
	}
}

// answering is connected with broker reading the connection.
func answering(t *testing.T) (*Link, *memOutbox, *wire, chan error, chan struct{}, chan struct{}, chan string) {
	t.Helper()
	l, ob, s, w, lost, done := connected(t, context.Background(), linkClient{silent: true})
	pongs, got := make(chan struct{}), make(chan string, 16)
	go broker(s, pongs, got)
	t.Cleanup(func() { close(pongs) })
	return l, ob, w, lost, done, pongs, got
}

func waitConfirmed(t *testing.T, w *wire, off uint64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); w.confirmedAt() < off; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("confirmed up to %d, want %d: no PINGRESP", w.confirmedAt(), off)
		}
	}
}

// TestPublishDirect_ConfirmedByAPingResponseIsNotQueuedAgain: the link
// asks the broker for a PINGRESP after QoS 0 publishes; the broker read
// everything written before the PINGREQ it answered (MQTT 3.1.1 §3.12,
// one ordered stream), so when the connection is lost only what was
// written after that is queued again.
func TestPublishDirect_ConfirmedByAPingResponseIsNotQueuedAgain(t *testing.T) {
	l, ob, w, lost, done, pongs, got := answering(t)
	if err := l.publishDirect(context.Background(), tagMsgs("a", 2)); err != nil {
		t.Fatal(err)
	}
	pongs <- struct{}{}
	waitConfirmed(t, w, l.q0.kept[0].end)
	if err := l.publishDirect(context.Background(), tagMsgs("b", 2)); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		<-got // the broker read b0 b1 too, but confirms nothing more
	}
	lost <- errors.New("EOF")
	<-done
	q, _ := ob.Read(0, 10)
	if got := fmt.Sprint(payloads(q)); got != "[b0 b1]" {
		t.Fatalf("queued after the connection was lost: %s, want [b0 b1] (a0 a1 were confirmed)", got)
	}
}

// TestConfirmQoS0_ConfirmsWhatWasWrittenWhileAPingWasOutstanding: values
// written while the link's PINGREQ is unanswered, or within pingSpacing
// of it, get no PINGREQ of their own (one is outstanding at a time, and
// they are spaced); publishTags' tick (confirmQoS0) asks for one once it
// was answered and the spacing passed, so they are confirmed without
// waiting for the next values, and a connection lost later queues nothing.
func TestConfirmQoS0_ConfirmsWhatWasWrittenWhileAPingWasOutstanding(t *testing.T) {
	l, ob, w, lost, done, pongs, _ := answering(t)
	if err := l.publishDirect(context.Background(), tagMsgs("a", 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.publishDirect(context.Background(), tagMsgs("b", 2)); err != nil {
		t.Fatal(err)
	}
	pongs <- struct{}{}
	waitConfirmed(t, w, l.q0.kept[0].end)
	end := l.q0.kept[len(l.q0.kept)-1].end
	if w.confirmedAt() >= end {
		t.Fatal("b0 b1 confirmed by the PINGREQ written before them")
	}
	l.confirmQoS0()
	pongs <- struct{}{}
	waitConfirmed(t, w, end)
	// Within the spacing of the last PINGREQ no pass asks for another; the
	// tick does once the spacing passed.
	l.q0.spacing = time.Hour
	if err := l.publishDirect(context.Background(), tagMsgs("c", 1)); err != nil {
		t.Fatal(err)
	}
	l.confirmQoS0()
	w.mu.Lock()
	asked := len(w.pings)
	w.mu.Unlock()
	if asked != 0 {
		t.Fatal("a PINGREQ within the spacing of the last")
	}
	l.q0.spacing = 0
	l.confirmQoS0()
	pongs <- struct{}{}
	waitConfirmed(t, w, l.q0.kept[len(l.q0.kept)-1].end)
	lost <- errors.New("EOF")
	<-done
	if q, _ := ob.Read(0, 10); len(q) != 0 {
		t.Fatalf("queued after the connection was lost: %v, want nothing (all confirmed)", payloads(q))
	}
}

// TestPublishDirect_AtTheBoundWaitsForTheBroker: the QoS 0 messages
// kept until the broker confirms them are bounded; at the bound a publish
// asks for a PINGRESP and waits for it (as a write waits for room in the
// pending buffer), then goes on writing: nothing is queued.
func TestPublishDirect_AtTheBoundWaitsForTheBroker(t *testing.T) {
	l, ob, _, lost, done, pongs, got := answering(t)
	l.q0.max = 3 * unconfirmedCost(tagMsgs("a", 1)[0])
	wrote := make(chan error, 1)
	go func() { wrote <- l.publishDirect(context.Background(), tagMsgs("a", 5)) }()
	for range 3 {
		<-got
	}
	pongs <- struct{}{} // the broker read a0 a1 a2, then the PINGREQ
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		<-got // a3 a4 written after the PINGRESP
	}
	if q, _ := ob.Read(0, 10); len(q) != 0 {
		t.Fatalf("queued %v, want nothing", payloads(q))
	}
	if l.q0.bytes > l.q0.max {
		t.Fatalf("%d bytes unconfirmed, bound %d", l.q0.bytes, l.q0.max)
	}
	lost <- errors.New("EOF")
	<-done
	if q, _ := ob.Read(0, 10); fmt.Sprint(payloads(q)) != "[a3 a4]" {
		t.Fatalf("queued after the connection was lost: %v, want [a3 a4] (unconfirmed)", payloads(q))
	}
}

// TestPublishDirect_UnconfirmedPastTheBoundIsQueued: a connection that
// confirms nothing while a publish waits at the bound counts as lost:
// what was kept is queued in the outbox, and the later values go on, so
// memory stays bounded and still nothing is lost.
func TestPublishDirect_UnconfirmedPastTheBoundIsQueued(t *testing.T) {
	l, ob, s, _, lost, done := connected(t, context.Background(), linkClient{silent: true})
	defer s.Close() // the broker never reads: no PINGRESP, no PUBACK
	l.q0.max = 3 * unconfirmedCost(tagMsgs("a", 1)[0])
	l.q0.wait = time.Millisecond
	if err := l.publishDirect(context.Background(), tagMsgs("a", 5)); err != nil {
		t.Fatal(err)
	}
	q, _ := ob.Read(0, 10)
	if got := fmt.Sprint(payloads(q)); got != "[a0 a1 a2]" {
		t.Fatalf("queued %s, want [a0 a1 a2] (the three kept when a3 came)", got)
	}
	if l.q0.bytes > l.q0.max {
		t.Fatalf("%d bytes unconfirmed, bound %d", l.q0.bytes, l.q0.max)
	}
	lost <- errors.New("EOF")
	<-done
	q, _ = ob.Read(0, 10)
	if got := fmt.Sprint(payloads(q)); got != "[a0 a1 a2 a3 a4]" {
		t.Fatalf("queued %s, want every message once, in order", got)
	}
}

// TestRunConnection_StopQueuesUnconfirmedUnlessTheStatusWasAcked: on a
// clean stop the offline status (QoS 1) is published after the QoS 0
// messages; its PUBACK confirms them, else they are queued for the next
// start.
func TestRunConnection_StopQueuesUnconfirmedUnlessTheStatusWasAcked(t *testing.T) {
	for _, nack := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		l, ob, s, _, _, done := connected(t, ctx, linkClient{nack: nack})
		if err := l.publishDirect(ctx, tagMsgs("a", 2)); err != nil {
			t.Fatal(err)
		}
		cancel()
		<-done
		s.Close()
		q, _ := ob.Read(0, 10)
		want := map[bool]string{false: "[]", true: "[a0 a1]"}[nack]
		if got := fmt.Sprint(payloads(q)); got != want {
			t.Errorf("status not acknowledged %v: queued %s, want %s", nack, got, want)
		}
	}
}

// TestWire_PingrespConfirmsWhatWasWrittenBeforeItsPingreq: the wire
// follows the broker's packets however the reads split them (a payload
// holding the bytes of a PINGRESP is no PINGRESP); each PINGRESP answers
// the oldest PINGREQ outstanding, the link's (ping) or paho's (a Write),
// and confirms every byte written before it.
func TestWire_PingrespConfirmsWhatWasWrittenBeforeItsPingreq(t *testing.T) {
	c, _ := tcpPair(t)
	w := newWire(c, 5*time.Second)
	defer w.Close()
	e1, err := w.writePublish0("q", "t", false, []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if !w.ping() || w.ping() {
		t.Fatal("ping: want one PINGREQ written, then none while it is outstanding")
	}
	e2, _ := w.writePublish0("q", "t", false, []byte("2"))
	w.Write(pingreq[:]) // paho's keep-alive
	e3, _ := w.writePublish0("q", "t", false, []byte("3"))

	var in []byte
	pub := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
	pub.TopicName, pub.Payload = "cmd/x", []byte{0xd0, 0, 0xd0, 0}
	var b writeBuf
	pub.Write(&b)
	in = append(in, b...)
	in = append(in, 0xd0, 0) // answers the link's PINGREQ
	in = append(in, b...)
	for i := range in { // one byte per read
		w.scan(in[i : i+1])
	}
	if got := w.confirmedAt(); got <= e1 || got >= e2 {
		t.Fatalf("confirmed up to %d; want past the first publish (%d), before the second (%d)", got, e1, e2)
	}
	w.scan([]byte{0xd0, 0}) // answers paho's
	if got := w.confirmedAt(); got <= e2 || got >= e3 {
		t.Fatalf("confirmed up to %d; want past the second publish (%d), before the third (%d)", got, e2, e3)
	}
	w.scan([]byte{0xd0, 0}) // none outstanding: nothing more confirmed
	if got := w.confirmedAt(); got >= e3 {
		t.Fatalf("confirmed up to %d, past the third publish (%d) no PINGREQ followed", got, e3)
	}
}

// writeBuf is an io.Writer into a byte slice.
type writeBuf []byte

func (b *writeBuf) Write(p []byte) (int, error) { *b = append(*b, p...); return len(p), nil }

// gateConn is a connection whose writes wait for release, then fail.
type gateConn struct {
	net.Conn
	release chan struct{}
}

func (g gateConn) Write([]byte) (int, error)      { <-g.release; return 0, errors.New("connection reset") }
func (gateConn) Close() error                     { return nil }
func (gateConn) SetWriteDeadline(time.Time) error { return nil }

// TestPublishDirect_WireFailsAfterValuesWereWritten: values are written
// to the wire, then its system call fails (the connection is reset); the
// next values find the wire failed: the unconfirmed ones are queued first,
// then the new ones, in order.
func TestPublishDirect_WireFailsAfterValuesWereWritten(t *testing.T) {
	ob := newMemOutbox()
	l, err := New(Options{ApplianceID: "edge1", Config: Config{Brokers: []string{"tcp://127.0.0.1:1"}},
		Gateway: &fakeGateway{}, Outbox: ob, Seen: &memSeen{}})
	if err != nil {
		t.Fatal(err)
	}
	g := gateConn{release: make(chan struct{})}
	w := newWire(g, time.Second)
	l.client, l.wire = openClient{}, w
	if err := l.publishDirect(context.Background(), tagMsgs("a", 2)); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	<-w.done
	if err := l.publishDirect(context.Background(), tagMsgs("b", 1)); err != nil {
		t.Fatal(err)
	}
	q, _ := ob.Read(0, 10)
	if got := fmt.Sprint(payloads(q)); got != "[a0 a1 b0]" {
		t.Fatalf("queued %s, want [a0 a1 b0]", got)
	}
}
