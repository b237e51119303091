package opcuastore

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/config"
	"qubiq.dev/edge/device"
	_ "qubiq.dev/edge/device/sim"
	"qubiq.dev/edge/store/storetest"
	"qubiq.dev/edge/tagengine"
	"qubiq.dev/edge/value"
)

var quiet = slog.New(slog.DiscardHandler)

// fakeUA is a driver that converts addresses like opcua.Driver: every
// "ns=2;..." address it checked is "nsu=urn:fake;..." once connected is set.
type fakeUA struct {
	mu        sync.Mutex
	checked   map[string]string
	connected bool
}

var fakeUAs struct {
	sync.Mutex
	last *fakeUA
}

func init() {
	device.Register("fakeua", func(device.Config) (device.Driver, error) {
		d := &fakeUA{checked: map[string]string{}}
		fakeUAs.Lock()
		fakeUAs.last = d
		fakeUAs.Unlock()
		return d, nil
	})
}

func (f *fakeUA) Validate() error { return nil }
func (f *fakeUA) CheckPoint(p device.Point) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checked[p.Tag] = p.Address
	return nil
}
func (f *fakeUA) Open(context.Context) error { return nil }
func (f *fakeUA) Read(_ context.Context, ps []device.Point) []value.VQT {
	return make([]value.VQT, len(ps))
}
func (f *fakeUA) Write(context.Context, device.Point, value.Value) error { return nil }
func (f *fakeUA) Close(context.Context) error                            { return nil }

func (f *fakeUA) ResolvedAddresses() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	if !f.connected {
		return out
	}
	for tag, a := range f.checked {
		out[tag] = strings.Replace(a, "ns=2;", "nsu=urn:fake;", 1)
	}
	return out
}

func (f *fakeUA) connect() {
	f.mu.Lock()
	f.connected = true
	f.mu.Unlock()
}

const resolvedProject = `
devices:
  - {name: ua, driver: fakeua}
  - {name: sim, driver: sim}
tags:
  - {path: UA/Speed, device: ua, address: "ns=2;s=Speed"}
  - {path: UA/Temp, device: ua, address: "nsu=urn:fake;s=Temp"}
  - {path: UA/Level, device: ua, address: "ns=2;i=7"}
  - {path: Sim/X, device: sim, address: memory}
`

// buildTags builds the drivers and tags of resolvedProject as the service
// does (each tag's point checked by its driver, which the fake driver
// records), and returns them with the fake OPC UA driver.
func buildTags(t *testing.T) (map[string]device.Driver, []tagengine.Tag, *fakeUA) {
	t.Helper()
	p, err := config.ParseProject([]byte(resolvedProject))
	if err != nil {
		t.Fatal(err)
	}
	devs := map[string]device.Driver{}
	var ua *fakeUA
	for _, dc := range p.Devices {
		f, _ := device.Lookup(dc.Driver)
		d, err := f(device.Config{Name: dc.Name, Raw: dc.Raw, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		devs[dc.Name] = d
		if f, ok := d.(*fakeUA); ok {
			ua = f
		}
	}
	tags, err := p.EngineTags()
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range tags {
		if err := devs[tg.Device].CheckPoint(tg.Point); err != nil {
			t.Fatal(err)
		}
	}
	return devs, tags, ua
}

// shown returns the tag addresses as the tag list shows them: converted
// since start, else the engine's.
func shown(r *Addresses, tags []tagengine.Tag) map[string]string {
	out := map[string]string{}
	for _, tg := range tags {
		out[tg.Path] = tg.Point.Address
		if a, ok := r.Shown(tg.Path); ok {
			out[tg.Path] = a
		}
	}
	return out
}

// TestAddresses_ConvertedOnceStoredAndAppliedAtNextStart follows an ns=
// address through its life: the project's form until the first connection,
// the nsu= form in the tag list once the driver converted it, stored in the
// meta, and the engine's own address at the next start.
func TestAddresses_ConvertedOnceStoredAndAppliedAtNextStart(t *testing.T) {
	db := storetest.MustOpen(t)
	devs, tags, drv := buildTags(t)
	r := NewAddresses(db, quiet)
	r.every = 5 * time.Millisecond
	tags = r.Apply(devs, tags)
	if got := shown(r, tags)["UA/Speed"]; got != "ns=2;s=Speed" {
		t.Fatalf("before any connection UA/Speed shows %q, want the project's ns=2;s=Speed", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Watch(ctx)
	defer r.Stop()
	drv.connect()
	deadline := time.Now().Add(5 * time.Second)
	for shown(r, tags)["UA/Level"] != "nsu=urn:fake;i=7" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	want := map[string]string{"UA/Speed": "nsu=urn:fake;s=Speed", "UA/Temp": "nsu=urn:fake;s=Temp",
		"UA/Level": "nsu=urn:fake;i=7", "Sim/X": "memory"}
	if got := shown(r, tags); !equalMaps(got, want) {
		t.Fatalf("after the connection the tag list shows %v, want %v", got, want)
	}
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the watch did not end once every address was converted")
		}
	}
	raw, err := db.Meta("opcua_resolved/ua")
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string]resolvedAddr
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatalf("meta %q: %v", raw, err)
	}
	wantStored := map[string]resolvedAddr{
		"UA/Speed": {Address: "ns=2;s=Speed", Resolved: "nsu=urn:fake;s=Speed"},
		"UA/Level": {Address: "ns=2;i=7", Resolved: "nsu=urn:fake;i=7"},
	}
	if len(stored) != len(wantStored) || stored["UA/Speed"] != wantStored["UA/Speed"] || stored["UA/Level"] != wantStored["UA/Level"] {
		t.Errorf("stored %v, want %v (only the ns= addresses)", stored, wantStored)
	}

	// The next start: a fresh address book over the same store builds the
	// tags with the stored form, before any connection.
	devs2, tags2, _ := buildTags(t)
	r2 := NewAddresses(db, quiet)
	for _, tg := range r2.Apply(devs2, tags2) {
		if w := want[tg.Path]; tg.Point.Address != w {
			t.Errorf("next start: engine address of %s = %q, want %q", tg.Path, tg.Point.Address, w)
		}
	}
	if n := len(r2.pending); n != 0 {
		t.Errorf("next start: %d devices still wait for conversions, want none", n)
	}
}

func TestAddresses_Apply_OnlyWhileTheProjectNamesTheStoredAddress(t *testing.T) {
	db := storetest.MustOpen(t)
	stored := map[string]resolvedAddr{
		"UA/Speed": {Address: "ns=3;s=Speed", Resolved: "nsu=urn:old;s=Speed"}, // the project changed it since
		"UA/Level": {Address: "ns=2;i=7", Resolved: "nsu=urn:fake;i=7"},
	}
	b, _ := json.Marshal(stored)
	if err := db.PutMeta("opcua_resolved/ua", b); err != nil {
		t.Fatal(err)
	}
	devs := map[string]device.Driver{"ua": &fakeUA{checked: map[string]string{}}}
	tags := []tagengine.Tag{
		{Path: "UA/Speed", Device: "ua", Point: device.Point{Tag: "UA/Speed", Address: "ns=2;s=Speed"}},
		{Path: "UA/Level", Device: "ua", Point: device.Point{Tag: "UA/Level", Address: "ns=2;i=7"}},
		{Path: "UA/Temp", Device: "ua", Point: device.Point{Tag: "UA/Temp", Address: "nsu=urn:fake;s=Temp"}},
	}
	r := NewAddresses(db, quiet)
	got := r.Apply(devs, tags)
	want := []string{"ns=2;s=Speed", "nsu=urn:fake;i=7", "nsu=urn:fake;s=Temp"}
	for i, tg := range got {
		if tg.Point.Address != want[i] {
			t.Errorf("%s: address %q, want %q", tg.Path, tg.Point.Address, want[i])
		}
	}
	if p := r.pending["ua"]; len(p) != 1 || p["UA/Speed"] != "ns=2;s=Speed" {
		t.Errorf("pending = %v, want only UA/Speed (its stored conversion is stale)", r.pending)
	}
}

func TestDefaults_PKIDirForOPCUAOnly(t *testing.T) {
	d := Defaults("/var/lib/qubiq")
	if got := string(d("opcua", []byte(`{"url":"opc.tcp://x"}`))); got != `{"pki_dir":"/var/lib/qubiq/pki","url":"opc.tcp://x"}` {
		t.Errorf("opcua: %s", got)
	}
	if got := string(d("opcua", []byte(`{"pki_dir":"/etc/pki"}`))); got != `{"pki_dir":"/etc/pki"}` {
		t.Errorf("own pki_dir: %s", got)
	}
	if got := string(d("modbus", []byte(`{"url":"tcp://x"}`))); got != `{"url":"tcp://x"}` {
		t.Errorf("modbus: %s", got)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
