package daemon

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/tagengine"
	"qubiq.dev/edge/value"
)

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

// addresses returns the engine's tag addresses by path.
func addresses(s *System) map[string]string {
	out := map[string]string{}
	for _, ti := range (tagsAPI{s}).ListTags(context.Background(), auth.Full("t", auth.RealmPlatform, "test")) {
		out[ti.Path] = ti.Address
	}
	return out
}

// TestResolved_ConvertedOnceStoredAndAppliedAtNextStart follows an ns=
// address through its life: the project's form until the first connection,
// the nsu= form in GET /api/v1/tags once the driver converted it, stored in
// the meta, and the engine's own address at the next start.
func TestResolved_ConvertedOnceStoredAndAppliedAtNextStart(t *testing.T) {
	dir := t.TempDir()
	s := newStoreSystem(t, dir, resolvedProject)
	if err := s.buildEngine(); err != nil {
		t.Fatal(err)
	}
	if got := addresses(s)["UA/Speed"]; got != "ns=2;s=Speed" {
		t.Fatalf("before any connection UA/Speed shows %q, want the project's ns=2;s=Speed", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.resolved.start(ctx, s.DB, 5*time.Millisecond, quiet)
	fakeUAs.Lock()
	drv := fakeUAs.last
	fakeUAs.Unlock()
	drv.connect()
	deadline := time.Now().Add(5 * time.Second)
	for addresses(s)["UA/Level"] != "nsu=urn:fake;i=7" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	want := map[string]string{"UA/Speed": "nsu=urn:fake;s=Speed", "UA/Temp": "nsu=urn:fake;s=Temp",
		"UA/Level": "nsu=urn:fake;i=7", "Sim/X": "memory"}
	if got := addresses(s); !equalMaps(got, want) {
		t.Fatalf("after the connection GET /tags shows %v, want %v", got, want)
	}
	select {
	case <-s.resolved.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not end once every address was converted")
	}
	raw, err := s.DB.Meta("opcua_resolved/ua")
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

	// The next start: a fresh System over the same store builds the
	// engine with the stored form, before any connection.
	s2 := &System{Config: s.Config, Log: quiet, DB: s.DB, Audit: s.Audit, started: time.Now()}
	s2.project.Store(s.Project())
	if err := s2.buildEngine(); err != nil {
		t.Fatal(err)
	}
	for _, ti := range s2.Engine().Tags(auth.Full("t", auth.RealmPlatform, "test")) {
		if w := want[ti.Path]; ti.Point.Address != w {
			t.Errorf("next start: engine address of %s = %q, want %q", ti.Path, ti.Point.Address, w)
		}
	}
	if n := len(s2.resolved.pending); n != 0 {
		t.Errorf("next start: %d devices still wait for conversions, want none", n)
	}
}

func TestResolved_Apply_OnlyWhileTheProjectNamesTheStoredAddress(t *testing.T) {
	dir := t.TempDir()
	s := newStoreSystem(t, dir, resolvedProject)
	stored := map[string]resolvedAddr{
		"UA/Speed": {Address: "ns=3;s=Speed", Resolved: "nsu=urn:old;s=Speed"}, // the project changed it since
		"UA/Level": {Address: "ns=2;i=7", Resolved: "nsu=urn:fake;i=7"},
	}
	b, _ := json.Marshal(stored)
	if err := s.DB.PutMeta("opcua_resolved/ua", b); err != nil {
		t.Fatal(err)
	}
	devs := map[string]device.Driver{"ua": &fakeUA{checked: map[string]string{}}}
	tags := []tagengine.Tag{
		{Path: "UA/Speed", Device: "ua", Point: device.Point{Tag: "UA/Speed", Address: "ns=2;s=Speed"}},
		{Path: "UA/Level", Device: "ua", Point: device.Point{Tag: "UA/Level", Address: "ns=2;i=7"}},
		{Path: "UA/Temp", Device: "ua", Point: device.Point{Tag: "UA/Temp", Address: "nsu=urn:fake;s=Temp"}},
	}
	var r resolvedAddrs
	got := r.applyResolved(s.DB, devs, tags, quiet)
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
