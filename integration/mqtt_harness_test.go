//go:build integration

package integration

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// The supervisor's side of the link, written from the contract
// (docs/mqtt.md), not from package mqtt: the signed bytes, the envelope,
// the reply topics.

const mqttBase = "qubiq/v1/it-01/"

// supKey is a supervisor's ed25519 key pair and its key id.
type supKey struct {
	id   string
	priv ed25519.PrivateKey
	pub  string // base64, as trusted_keys takes it
}

func newSupKey(t *testing.T, id string) supKey {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return supKey{id: id, priv: priv, pub: base64.StdEncoding.EncodeToString(pub)}
}

// signed makes a command payload: the signature covers "qubiq-cmd-v1\n" +
// topic suffix + "\n" + id + "\n" + ts + "\n" + hex(sha256(body as sent)).
func (k supKey) signed(topic, id string, ts time.Time, body string) []byte {
	tsText := ts.UTC().Format(time.RFC3339Nano)
	sum := sha256.Sum256([]byte(body))
	msg := "qubiq-cmd-v1\n" + topic + "\n" + id + "\n" + tsText + "\n" + hex.EncodeToString(sum[:])
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(k.priv, []byte(msg)))
	return []byte(fmt.Sprintf(`{"id":%q,"key_id":%q,"ts":%q,"body":%s,"sig":%q}`, id, k.id, tsText, body, sig))
}

// mqttReply is a reply on reply/<id>.
type mqttReply struct {
	ID     string          `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Kind   string `json:"kind"`
		Detail string `json:"detail"`
	} `json:"error"`
}

// supervisor is an MQTT client of the test's broker subscribed to the
// appliance's replies (and what else it asks for).
type supervisor struct {
	t  *testing.T
	c  paho.Client
	mu sync.Mutex
	// replies by command id
	replies map[string]mqttReply
	msgs    []paho.Message // every other message, in arrival order
}

// newSupervisor connects to broker with client id, a persistent session
// (so it misses nothing while the broker restarts) and auto-reconnect,
// subscribing filters (below the appliance's base) at QoS 1.
func newSupervisor(t *testing.T, broker, id string, filters ...string) *supervisor {
	t.Helper()
	s := &supervisor{t: t, replies: map[string]mqttReply{}}
	subs := map[string]byte{mqttBase + "reply/#": 1}
	for _, f := range filters {
		subs[mqttBase+f] = 1
	}
	o := paho.NewClientOptions().AddBroker(broker).SetClientID(id).SetCleanSession(false).
		SetAutoReconnect(true).SetMaxReconnectInterval(500 * time.Millisecond).SetOrderMatters(true).
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if rest, ok := strings.CutPrefix(m.Topic(), mqttBase+"reply/"); ok {
				var r mqttReply
				if err := json.Unmarshal(m.Payload(), &r); err != nil {
					t.Errorf("reply on %s: %v: %s", m.Topic(), err, m.Payload())
				}
				s.replies[rest] = r
				return
			}
			s.msgs = append(s.msgs, m)
		}).
		SetOnConnectHandler(func(c paho.Client) { c.SubscribeMultiple(subs, nil).Wait() })
	s.c = paho.NewClient(o)
	if tok := s.c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("supervisor connect: %v", tok.Error())
	}
	time.Sleep(200 * time.Millisecond) // the subscription of OnConnect
	t.Cleanup(func() { s.c.Disconnect(100) })
	return s
}

// send publishes a command payload on the command topic (QoS 1).
func (s *supervisor) send(topic string, payload []byte) {
	s.t.Helper()
	tok := s.c.Publish(mqttBase+topic, 1, false, payload)
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		s.t.Fatalf("publish %s: %v", topic, tok.Error())
	}
}

// reply waits for the reply to id.
func (s *supervisor) reply(id string, timeout time.Duration) mqttReply {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		r, ok := s.replies[id]
		s.mu.Unlock()
		if ok {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("no reply to %s within %s", id, timeout)
	return mqttReply{}
}

// forget drops the reply to id seen so far (a command sent again).
func (s *supervisor) forget(id string) {
	s.mu.Lock()
	delete(s.replies, id)
	s.mu.Unlock()
}

// do signs and sends a command with a fresh id and waits for its reply.
func (s *supervisor) do(k supKey, topic, body string) mqttReply {
	s.t.Helper()
	id := fmt.Sprintf("c-%d", time.Now().UnixNano())
	s.send(topic, k.signed(topic, id, time.Now(), body))
	return s.reply(id, 30*time.Second)
}

func (s *supervisor) messages() []paho.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]paho.Message(nil), s.msgs...)
}

// mqttBlock is the daemon config's mqtt: block for the test's brokers and
// one supervisor key with grant.
func mqttBlock(brokers []string, k supKey, grant string, extra string) string {
	q := make([]string, len(brokers))
	for i, b := range brokers {
		q[i] = fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf(`mqtt:
  brokers: [%s]
  trusted_keys: {%s: %q}
  grants: {%s: %s}
  keepalive: 2s
  reconnect: {min: 100ms, max: 500ms}
%s`, strings.Join(q, ", "), k.id, k.pub, k.id, grant, extra)
}

// withMQTT appends the mqtt: block to the daemon's config.
func (d *daemon) withMQTT(block string) {
	d.t.Helper()
	f, err := os.OpenFile(d.cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		d.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(block); err != nil {
		d.t.Fatal(err)
	}
}

// kill ends qubiqd with SIGKILL (no clean shutdown).
func (d *daemon) kill() {
	d.t.Helper()
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exitErr
	d.cmd = nil
}

// mqttHealth is the mqtt object of /health.
type mqttHealth struct {
	Connected     bool   `json:"connected"`
	Broker        string `json:"broker"`
	LastError     string `json:"last_error"`
	OutboxDepth   int    `json:"outbox_depth"`
	OutboxDropped uint64 `json:"outbox_dropped"`
	RequireSigned bool   `json:"require_signed"`
}

func (d *daemon) mqttHealth() mqttHealth {
	d.t.Helper()
	var h struct {
		MQTT *mqttHealth `json:"mqtt"`
	}
	d.call("GET", "/api/v1/health", "", nil, &h)
	if h.MQTT == nil {
		d.t.Fatal("health has no mqtt object")
	}
	return *h.MQTT
}

// waitConnected waits until health shows the link connected to broker.
func (d *daemon) waitConnected(broker string) {
	d.t.Helper()
	waitFor(d.t, 30*time.Second, "the link connected to "+broker, func() (bool, string) {
		h := d.mqttHealth()
		return h.Connected && h.Broker == broker, fmt.Sprintf("%+v", h)
	})
}
