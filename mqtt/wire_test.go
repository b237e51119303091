package mqtt

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

func tcpPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); acc <- c }()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-acc
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestWire_PacketsArriveWholeAndInOrderThenClosed: paho's packets (one
// Write each) and the link's QoS 0 publishes, written from two goroutines,
// arrive whole, each writer's in its order; Close right after the last
// write still sends everything pending, then the connection ends.
func TestWire_PacketsArriveWholeAndInOrderThenClosed(t *testing.T) {
	c, s := tcpPair(t)
	w := newWire(c, 5*time.Second)
	const n = 5000
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // paho's side: QoS 1 publishes
		defer wg.Done()
		for i := range n {
			p := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
			p.Qos, p.MessageID, p.TopicName, p.Payload = 1, uint16(i%65535+1), "q/v1/e/x", []byte(fmt.Sprint(i))
			if err := p.Write(w); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() { // the link's side: QoS 0 tag values
		defer wg.Done()
		for i := range n {
			if _, err := w.writePublish0("q/v1/e", fmt.Sprintf("tags/T%d", i), i%2 == 0, []byte(fmt.Sprint(i))); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(s)
	next0, next1 := 0, 0
	for next0 < n || next1 < n {
		cp, err := packets.ReadPacket(r)
		if err != nil {
			t.Fatalf("after %d QoS 0 and %d QoS 1 packets: %v", next0, next1, err)
		}
		p := cp.(*packets.PublishPacket)
		switch p.Qos {
		case 0:
			if want := fmt.Sprintf("q/v1/e/tags/T%d", next0); p.TopicName != want || string(p.Payload) != fmt.Sprint(next0) || p.Retain != (next0%2 == 0) {
				t.Fatalf("QoS 0 packet %d: %q %q retain %v", next0, p.TopicName, p.Payload, p.Retain)
			}
			next0++
		case 1:
			if p.TopicName != "q/v1/e/x" || string(p.Payload) != fmt.Sprint(next1) || p.MessageID != uint16(next1%65535+1) {
				t.Fatalf("QoS 1 packet %d: %q %q id %d", next1, p.TopicName, p.Payload, p.MessageID)
			}
			next1++
		}
	}
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("after the last packet: %v, want EOF", err)
	}
	if _, err := w.Write([]byte{0xc0, 0}); err == nil {
		t.Fatal("a write after Close succeeded")
	}
	if _, err := w.writePublish0("q", "t", false, nil); err == nil {
		t.Fatal("a QoS 0 publish after Close succeeded")
	}
}

// failConn is a connection whose writes fail.
type failConn struct {
	net.Conn
	closed chan struct{}
	once   sync.Once
}

func (f *failConn) Write([]byte) (int, error) { return 0, errors.New("connection reset") }
func (f *failConn) Close() error              { f.once.Do(func() { close(f.closed) }); return nil }
func (f *failConn) SetWriteDeadline(time.Time) error {
	return nil
}

// TestWire_FailedWriteClosesAndIsReported: a system call that fails closes
// the connection (so paho's reader ends it) and every later write, paho's
// and the link's, returns an error (so the link queues its message).
func TestWire_FailedWriteClosesAndIsReported(t *testing.T) {
	f := &failConn{closed: make(chan struct{})}
	w := newWire(f, time.Second)
	if _, err := w.Write([]byte{0xc0, 0}); err != nil {
		t.Fatalf("the first write (queued): %v", err)
	}
	<-f.closed
	<-w.done
	if _, err := w.Write([]byte{0xc0, 0}); err == nil || err.Error() != "connection reset" {
		t.Fatalf("a write after the failure: %v, want connection reset", err)
	}
	if _, err := w.writePublish0("q", "t", false, []byte("x")); err == nil {
		t.Fatal("a QoS 0 publish after the failure succeeded")
	}
}

// openClient is a paho client that says its connection is open.
type openClient struct{ paho.Client }

func (openClient) IsConnectionOpen() bool { return true }

// TestPublishDirect_QueuedWhenTheConnectionFailed: QoS 0 values published
// while the client still counts the connection open but its wire has
// failed go to the outbox (at QoS 1, in order), not lost.
func TestPublishDirect_QueuedWhenTheConnectionFailed(t *testing.T) {
	ob := newMemOutbox()
	l, err := New(Options{ApplianceID: "edge1", Config: Config{Brokers: []string{"tcp://127.0.0.1:1"}},
		Gateway: &fakeGateway{}, Outbox: ob, Seen: &memSeen{}})
	if err != nil {
		t.Fatal(err)
	}
	f := &failConn{closed: make(chan struct{})}
	w := newWire(f, time.Second)
	w.Write([]byte{0xc0, 0})
	<-w.done
	l.client, l.wire = openClient{}, w
	msgs := []Message{{Topic: "tags/A", Payload: []byte("1")}, {Topic: "tags/B", Payload: []byte("2")}}
	if err := l.publishDirect(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	q, _ := ob.Read(0, 10)
	if len(q) != 2 || q[0].Topic != "qubiq/v1/edge1/tags/A" || q[1].Topic != "qubiq/v1/edge1/tags/B" {
		t.Fatalf("queued %+v, want both values in order", q)
	}
}

// TestPublishDirect_TopicWithAQueuedMessageWaitsBehindIt: while a topic
// has a message in the outbox its new QoS 0 messages are queued behind it
// (order per topic); other topics go straight out; once the queued message
// left the outbox (acknowledged), the topic goes straight out again.
func TestPublishDirect_TopicWithAQueuedMessageWaitsBehindIt(t *testing.T) {
	ob := newMemOutbox()
	l, err := New(Options{ApplianceID: "edge1", Config: Config{Brokers: []string{"tcp://127.0.0.1:1"}},
		Gateway: &fakeGateway{}, Outbox: ob, Seen: &memSeen{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Made while the link was down: queued.
	if err := l.publishDirect(ctx, []Message{{Topic: "tags/A", Payload: []byte("a1")}}); err != nil {
		t.Fatal(err)
	}
	c, s := tcpPair(t)
	w := newWire(c, 5*time.Second)
	l.client, l.wire = openClient{}, w
	if err := l.publishDirect(ctx, []Message{{Topic: "tags/A", Payload: []byte("a2")}, {Topic: "tags/B", Payload: []byte("b1")}}); err != nil {
		t.Fatal(err)
	}
	q, _ := ob.Read(0, 10)
	if len(q) != 2 || string(q[0].Payload) != "a1" || string(q[1].Payload) != "a2" {
		t.Fatalf("queued %+v, want a1 then a2", q)
	}
	ob.Remove(ctx, []uint64{q[0].Seq, q[1].Seq}) // acknowledged
	if err := l.publishDirect(ctx, []Message{{Topic: "tags/A", Payload: []byte("a3")}}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r := bufio.NewReader(s)
	for _, want := range []string{"b1", "a3"} {
		cp, err := packets.ReadPacket(r)
		for _, ping := cp.(*packets.PingreqPacket); err == nil && ping; _, ping = cp.(*packets.PingreqPacket) {
			cp, err = packets.ReadPacket(r) // the link asked for a PINGRESP (qos0.go)
		}
		if err != nil {
			t.Fatalf("reading %s: %v", want, err)
		}
		if p := cp.(*packets.PublishPacket); string(p.Payload) != want || p.Qos != 0 {
			t.Fatalf("sent %q at QoS %d, want %q at QoS 0", p.Payload, p.Qos, want)
		}
	}
	if q, _ := ob.Read(0, 10); len(q) != 0 {
		t.Fatalf("still queued: %+v", q)
	}
}

// TestDialer_TCPAndTLS: the link's dialer opens tcp:// and ssl:// brokers
// (TLS verified against the configured CA, the server name from the URL)
// and hands back the wire it reports; an unknown scheme is refused.
func TestDialer_TCPAndTLS(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	for _, c := range []struct {
		scheme string
		tls    bool
	}{{"tcp", false}, {"mqtt", false}, {"ssl", true}, {"mqtts", true}} {
		var ln net.Listener
		if c.tls {
			ln, err = tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
		} else {
			ln, err = net.Listen("tcp", "127.0.0.1:0")
		}
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte, 1)
		go func() {
			s, err := ln.Accept()
			if err != nil {
				return
			}
			defer s.Close()
			b := make([]byte, 2)
			io.ReadFull(s, b)
			got <- b
		}()
		var reported *wire
		u, _ := url.Parse(c.scheme + "://" + ln.Addr().String())
		conn, err := dialer(&tls.Config{RootCAs: pool}, 5*time.Second, 5*time.Second, func(w *wire) { reported = w })(u, paho.ClientOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.scheme, err)
		}
		if conn != net.Conn(reported) {
			t.Fatalf("%s: the wire reported is not the connection returned", c.scheme)
		}
		conn.Write([]byte{0xc0, 0})
		if b := <-got; b[0] != 0xc0 || b[1] != 0 {
			t.Fatalf("%s: the broker read %x", c.scheme, b)
		}
		conn.Close()
		ln.Close()
	}
	u, _ := url.Parse("ws://127.0.0.1:1")
	if _, err := dialer(nil, time.Second, time.Second, func(*wire) {})(u, paho.ClientOptions{}); err == nil {
		t.Fatal("ws:// was dialled")
	}
}
