package mqtt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"qubiq.dev/edge/auth"
)

// Topics the broker refuses (MQTT 3.1.1 §1.5.3; Mosquitto closes the
// connection of a client that sends one) never leave the link: a command
// id holding one is no id (its refusal gets no reply on reply/<id>), and
// a flow's topic or filter holding one is refused before the outbox or
// the subscription sees it (tagpath.CheckTopicText).

func TestValidID_RefusesWhatNoTopicMayHold(t *testing.T) {
	for _, id := range []string{"a\x01b", "a\tb", "a\x7fb", "a\u0085b", "a\uffffb", "a\uFDD0", "a\xffb", "a/b", "a+b", "a#b", "a\x00b", "", strings.Repeat("x", MaxIDBytes+1)} {
		if ValidID(id) {
			t.Errorf("ValidID(%q) = true, want false", id)
		}
	}
	for _, id := range []string{"a1", "2026-12-03T10:00:00Z-17", "Kühlung 1", strings.Repeat("x", MaxIDBytes)} {
		if !ValidID(id) {
			t.Errorf("ValidID(%q) = false, want true", id)
		}
	}
}

func TestDecodeEnvelope_ControlCharacterIDHasNoReplyTopic(t *testing.T) {
	for _, raw := range []string{`a\u0001b`, `a\u007fb`, `a\uffffb`} {
		payload := fmt.Sprintf(`{"id":"%s","key_id":"sup-a","ts":"%s","body":{"writes":[]}}`, raw, time.Now().UTC().Format(time.RFC3339))
		id, env, err := DecodeEnvelope("cmd/tags/write", []byte(payload))
		if id != "" || env != nil {
			t.Errorf("id %s: DecodeEnvelope returned id %q, envelope %v: want neither (no reply topic)", raw, id, env)
		}
		var r *Refusal
		if !errors.As(err, &r) || r.Kind != KindWrongType || !strings.Contains(r.Detail, "control characters") {
			t.Errorf("id %s: error %v, want a %s refusal naming control characters", raw, err, KindWrongType)
		}
	}
}

func TestLink_RefusesTopicsTheBrokerRefuses(t *testing.T) {
	ob := newMemOutbox()
	l, err := New(Options{ApplianceID: "edge1", Config: Config{Brokers: []string{"tcp://127.0.0.1:1"}},
		Gateway: &fakeGateway{}, Outbox: ob, Seen: &memSeen{}})
	if err != nil {
		t.Fatal(err)
	}
	g := auth.Grant{Principal: "flow:f"}
	err = l.Publish(context.Background(), g, "out/op\t1", []byte("1"), false)
	if err == nil || !strings.Contains(err.Error(), "control character U+0009") {
		t.Errorf("Publish on a topic with a tab: %v, want a refusal naming U+0009", err)
	}
	if q, _ := ob.Read(0, 10); len(q) != 0 {
		t.Errorf("the refused publish reached the outbox: %+v", q)
	}
	if _, _, _, err := l.SubscribeTopic("in/set\x7f", 8); err == nil || !strings.Contains(err.Error(), "U+007F") {
		t.Errorf("SubscribeTopic with a DEL: %v, want a refusal naming U+007F", err)
	}
	if err := l.Publish(context.Background(), g, "out/Kühlung 1", []byte("1"), false); err != nil {
		t.Errorf("Publish on a plain topic: %v", err)
	}
}

func TestNew_RefusesAnApplianceIDNoTopicLevelMayBe(t *testing.T) {
	for id, want := range map[string]string{"line/1": "cannot hold '/'", "edge+1": "cannot hold", "edge\t1": "U+0009", "edge\uffff": "U+FFFF"} {
		_, err := New(Options{ApplianceID: id, Config: Config{Brokers: []string{"tcp://127.0.0.1:1"}},
			Gateway: &fakeGateway{}, Outbox: newMemOutbox(), Seen: &memSeen{}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("appliance_id %q: %v, want an error containing %q", id, err, want)
		}
	}
}

// recordingClient is a linkClient that records the topics published.
type recordingClient struct {
	linkClient
	mu     *sync.Mutex
	topics *[]string
}

func (c recordingClient) Publish(topic string, qos byte, retain bool, payload any) paho.Token {
	c.mu.Lock()
	*c.topics = append(*c.topics, topic)
	c.mu.Unlock()
	return c.linkClient.Publish(topic, qos, retain, payload)
}

// TestForward_DropsAQueuedMessageOnATopicTheBrokerRefuses: a message an
// earlier build queued on a topic with a control character is removed
// from the outbox without being sent (the broker would close the
// connection at every attempt); the messages around it go out in order.
func TestForward_DropsAQueuedMessageOnATopicTheBrokerRefuses(t *testing.T) {
	var mu sync.Mutex
	var topics []string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, ob, _, _, _, done := connected(t, ctx, recordingClient{mu: &mu, topics: &topics})
	defer func() { cancel(); <-done }()
	if _, err := ob.Append(ctx, []Message{
		{Topic: "qubiq/v1/edge1/reply/a1", Payload: []byte("1")},
		{Topic: "qubiq/v1/edge1/reply/a\x01b", Payload: []byte("2")},
		{Topic: "qubiq/v1/edge1/reply/a3", Payload: []byte("3")},
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		q, _ := ob.Read(0, 10)
		if len(q) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still in the outbox after 5 s: %+v", q)
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"qubiq/v1/edge1/reply/a1", "qubiq/v1/edge1/reply/a3"}; !slices.Equal(topics, want) {
		t.Errorf("published %q, want %q", topics, want)
	}
}
