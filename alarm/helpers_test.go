package alarm

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/value"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// testTags are the tags the tests' definitions may name.
var testTags = map[string]TagInfo{
	"Line1/Tank/Level":   {Type: value.Float64, Units: "%"},
	"Line1/Tank/HighSP":  {Type: value.Float64, Units: "%"},
	"Line1/Tank/Temp":    {Type: value.Float32, Units: "°C"},
	"Line1/Pump/Running": {Type: value.Bool},
	"Line1/Pump/Status":  {Type: value.Uint16},
	"Line1/Pump/Mode":    {Type: value.Int16},
	"Line1/Unit/Stopped": {Type: value.Bool},
	"Line1/Name":         {Type: value.String},
	"Line2/Flow":         {Type: value.Float64, Units: "m3/h"},
}

// parseDefs parses an alarms: section given as YAML list items.
func parseDefs(t *testing.T, section string) ([]Instance, error) {
	t.Helper()
	var doc struct {
		Alarms []yaml.Node `yaml:"alarms"`
	}
	if err := yaml.Unmarshal([]byte("alarms:\n"+section), &doc); err != nil {
		t.Fatalf("test YAML: %v", err)
	}
	return Parse("project.yaml", doc.Alarms, testTags)
}

// harness is an engine driven by a test clock.
type harness struct {
	t   *testing.T
	e   *Engine
	now time.Time
	ch  <-chan Transition
	log []Transition
}

func newHarness(t *testing.T, section string, opts ...func(*Options)) *harness {
	t.Helper()
	insts, err := parseDefs(t, section)
	if err != nil {
		t.Fatalf("definitions: %v", err)
	}
	h := &harness{t: t, now: t0}
	o := Options{Now: func() time.Time { return h.now }}
	for _, f := range opts {
		f(&o)
	}
	h.e, err = New(o, insts)
	if err != nil {
		t.Fatal(err)
	}
	h.ch, _, _ = h.e.Subscribe(100000)
	return h
}

// withStore persists into db.
func withStore(db *store.DB) func(*Options) { return func(o *Options) { o.Journal = db } }

func openStore(t *testing.T, dir string) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(dir, store.FileName), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// at moves the clock to t0+d and handles the deadlines that passed.
func (h *harness) at(d time.Duration) {
	h.now = t0.Add(d)
	h.e.Advance()
}

// set gives tag path the value v (Good) at the current time.
func (h *harness) set(path string, v value.Value) {
	h.setQ(path, v, value.Good)
}

func (h *harness) setQ(path string, v value.Value, q value.Quality) {
	h.e.Apply([]Change{{Path: path, VQT: value.VQT{Value: v, Quality: q, Time: h.now}}})
}

// alarm returns the alarm id now.
func (h *harness) alarm(id string) Alarm {
	h.t.Helper()
	a, ok := h.e.Get(id)
	if !ok {
		h.t.Fatalf("no alarm %q", id)
	}
	return a
}

// wantState fails unless alarm id is in state s.
func (h *harness) wantState(id string, s State) Alarm {
	h.t.Helper()
	a := h.alarm(id)
	if a.State != s {
		h.t.Fatalf("at +%s: %s is %s, want %s (active %v, acked %v, evaluable %v %q)", h.now.Sub(t0), id, a.State, s, a.Active, a.Acked, a.Evaluable, a.Reason)
	}
	return a
}

// events returns the events of id published since the last call, as
// "event from→to".
func (h *harness) events(id string) []string {
	var out []string
	for {
		select {
		case tr := <-h.ch:
			h.log = append(h.log, tr)
			if tr.Alarm.ID == id {
				out = append(out, tr.Event+" "+tr.From+"→"+tr.To)
			}
		default:
			return out
		}
	}
}

// wantEvents fails unless the events of id since the last call are want.
func (h *harness) wantEvents(id string, want ...string) {
	h.t.Helper()
	got := h.events(id)
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		h.t.Fatalf("at +%s: events of %s:\n got  %q\n want %q", h.now.Sub(t0), id, got, want)
	}
}

var (
	operator   = auth.Grant{Principal: "ann", Realm: auth.RealmOperator, Scopes: []auth.Scope{auth.AlarmRead, auth.AlarmAck}, WriteLevel: auth.LevelOperate}
	viewer     = auth.Grant{Principal: "vic", Realm: auth.RealmOperator, Scopes: []auth.Scope{auth.AlarmRead, auth.AlarmAck}, WriteLevel: auth.LevelView}
	supervisor = auth.Grant{Principal: "sue", Realm: auth.RealmOperator, Scopes: []auth.Scope{auth.AlarmRead, auth.AlarmAck}, WriteLevel: auth.LevelSupervise}
)

func (h *harness) ack(g auth.Grant, ids ...string) []Result {
	h.t.Helper()
	res, err := h.e.Ack(g, ids, false)
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

// yamlNode is the mapping of a YAML document.
func yamlNode(t *testing.T, doc string) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		t.Fatal(err)
	}
	return n.Content[0]
}
