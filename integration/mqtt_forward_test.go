//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/internal/peers"
)

// TestMQTT_StoreAndForward_OutageAndKill: a QoS 1 token is not delivery
// evidence across a reconnect
// (https://github.com/eclipse-paho/paho.mqtt.golang/issues/563), scaled: 100 tags change at 1 Hz; the broker stops for
// about 7 s, during which qubiqd is killed with SIGKILL and restarted;
// then the broker starts again. A subscriber that kept its session sees
// every message of each run with no gap in the sequence numbers, in order
// per tag; duplicates (re-sent after a reconnect) are detectable by their
// sequence number and counted.
func TestMQTT_StoreAndForward_OutageAndKill(t *testing.T) { storeAndForward(t, 1, true) }

// TestMQTT_StoreAndForward_QoS0QueuedAtQoS1: QoS 0 publishes made while
// reconnecting are dropped by paho
// (https://github.com/eclipse-paho/paho.mqtt.golang/issues/630):
// tags published at QoS 0; what is made while the broker is away still
// goes out, through the outbox at QoS 1, with no gap.
func TestMQTT_StoreAndForward_QoS0QueuedAtQoS1(t *testing.T) { storeAndForward(t, 0, false) }

func storeAndForward(t *testing.T, qos int, kill bool) {
	b := peers.StartMosquitto(t)
	k := newSupKey(t, "sup-a")
	var p strings.Builder
	p.WriteString("devices:\n  - {name: sim, driver: sim}\ntags:\n")
	for i := range 100 {
		fmt.Fprintf(&p, "  - {path: F/T%03d, device: sim, address: \"ramp(0,100000,100000s)\", type: float64, scan: 1s}\n", i)
	}
	fmt.Fprintf(&p, "mqtt_publish:\n  rules:\n    - {prefix: F, mode: change, qos: %d}\n", qos)
	d := newDaemon(t, p.String())
	d.withMQTT(mqttBlock([]string{b.URL}, k, supGrant, ""))
	sub := newSupervisor(t, b.URL, "it-sub-forward", "tags/#")
	d.start()
	d.waitConnected(b.URL)
	waitFor(t, 20*time.Second, "values flowing", func() (bool, string) {
		n := len(sub.messages())
		return n >= 300, fmt.Sprint(n, " messages")
	})

	b.Stop()
	stopAt := time.Now()
	time.Sleep(3 * time.Second)
	if kill {
		d.kill()
		time.Sleep(500 * time.Millisecond)
		d.start()
	}
	time.Sleep(3 * time.Second)
	if h := d.mqttHealth(); h.Connected || h.OutboxDepth == 0 {
		t.Fatalf("during the outage: %+v; want the link down and messages waiting", h)
	}
	startAt := time.Now()
	b.Start()
	d.waitConnected(b.URL)
	waitFor(t, 30*time.Second, "the outbox drained", func() (bool, string) {
		h := d.mqttHealth()
		return h.OutboxDepth == 0, fmt.Sprintf("%+v", h)
	})
	time.Sleep(2 * time.Second)
	d.stop()
	time.Sleep(time.Second)

	type got struct {
		Seq uint64 `json:"seq"`
		T   string `json:"t"`
	}
	perTag := map[string][]uint64{}
	seen := map[uint64]int{}
	during := 0
	for _, m := range sub.messages() {
		var g got
		if err := json.Unmarshal(m.Payload(), &g); err != nil {
			t.Fatalf("%s: %v", m.Topic(), err)
		}
		seen[g.Seq]++
		if seen[g.Seq] > 1 {
			continue
		}
		perTag[m.Topic()] = append(perTag[m.Topic()], g.Seq)
		if ts, err := time.Parse(time.RFC3339Nano, g.T); err == nil && ts.After(stopAt) && ts.Before(startAt) {
			during++
		}
	}
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	t.Logf("%d messages, %d unique, %d duplicates, %d made during the outage", len(sub.messages()), len(seen), dups, during)
	if during < 300 {
		t.Errorf("%d values made during the outage arrived; want the ~6 s of 100 tags", during)
	}
	if len(perTag) != 100 {
		t.Errorf("%d tags seen, want 100", len(perTag))
	}
	for tag, seqs := range perTag {
		if !sort.SliceIsSorted(seqs, func(i, j int) bool { return seqs[i] < seqs[j] }) {
			t.Errorf("%s: sequence numbers out of order: %v", tag, seqs)
		}
	}
	// Each run numbers its messages from its start time (µs) up by one:
	// within a run, every number between the first and the last arrived.
	all := make([]uint64, 0, len(seen))
	for s := range seen {
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	runs, gaps := 1, 0
	for i := 1; i < len(all); i++ {
		switch d := all[i] - all[i-1]; {
		case d > 1_000_000:
			runs++
		case d > 1:
			gaps++
			t.Errorf("gap: %d messages missing after seq %d", d-1, all[i-1])
		}
	}
	if want := map[bool]int{true: 2, false: 1}[kill]; runs != want {
		t.Errorf("%d runs of sequence numbers, want %d", runs, want)
	}
	if gaps > 0 {
		t.Errorf("%d gaps", gaps)
	}
}
