package service

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/config"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/tagengine"
	"qubiq.dev/edge/value"
)

// browseTestDriver is a driver with an address space (device.Browser) for
// the browse route.
type browseTestDriver struct{ device.Driver }

func (browseTestDriver) Browse(_ context.Context, node string) ([]device.BrowseResult, error) {
	switch node {
	case "gone":
		return nil, device.Errorf(value.BadNodeIDUnknown, "node %q unknown", node)
	case "away":
		return nil, device.Errorf(value.BadNotConnected, "connecting")
	}
	return []device.BrowseResult{{NodeID: "nsu=urn:t;s=" + node + ".Speed", BrowseName: "Speed", NodeClass: "Variable",
		DataType: "Double", Writable: true}}, nil
}

func init() {
	device.Register("browsetest", func(cfg device.Config) (device.Driver, error) {
		f, _ := device.Lookup("sim")
		d, err := f(cfg)
		return browseTestDriver{d}, err
	})
}

const projectV1 = `# line 1: the plant
devices:
  - {name: sim, driver: sim}
  - {name: ua, driver: browsetest}
tags:
  - {path: L/Ramp, device: sim, address: "ramp(0,1000,2s)", type: float64, scan: 20ms}
  - {path: L/Set, device: sim, address: memory, type: float64, scan: 20ms, history: {enabled: true}}
  - {path: L/Gone, device: sim, address: memory, type: int16, scan: 20ms}
`

// newProjectService is a service over a project file (config "project:"),
// with its store, audit log and a running tag engine.
func newProjectService(t *testing.T, src string) *Service {
	t.Helper()
	dir := t.TempDir()
	s := newService(t, withProjectFile(t, testOptions(t, dir), dir, src))
	startEngine(t, s)
	return s
}

// readOne reads path until cond holds (5 s).
func readOne(t *testing.T, s *Service, path string, cond func(tagengine.Result) bool) tagengine.Result {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := s.Engine().Read(designer, []string{path})
		if err != nil {
			t.Fatal(err)
		}
		if cond(res[0]) {
			return res[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v %s (%s): condition not met", path, res[0].Value, res[0].Quality, res[0].Reason)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func good(r tagengine.Result) bool { return r.Quality == value.Good }

func TestService_ImportProject_SwapsEngine(t *testing.T) {
	s := newProjectService(t, projectV1)
	ctx := context.Background()
	if res, err := s.Engine().Write(ctx, designer, []tagengine.WriteRequest{{Path: "L/Set", Value: 42.5}}); err != nil || res[0].Quality != value.Good {
		t.Fatalf("write: %+v %v", res, err)
	}
	readOne(t, s, "L/Set", func(r tagengine.Result) bool { return good(r) && value.Equal(r.Value, 42.5) })
	readOne(t, s, "L/Gone", good)
	live, _, stopLive := s.SubscribeValues(designer, 4096) // the LiveView WebSocket's feed
	defer stopLive()
	old := s.Engine()

	v2 := strings.Replace(projectV1, "  - {path: L/Gone, device: sim, address: memory, type: int16, scan: 20ms}\n",
		"  - {path: L/New, device: sim, address: memory, type: int16, scan: 20ms}\n", 1)
	v2 = strings.Replace(v2, "type: float64, scan: 20ms, history", "type: float64, scan: 20ms, units: bar, history", 1)
	// API calls run on during the import (the race detector watches).
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			s.ReadTags(ctx, designer, []string{"L/Set", "L/New"})
			s.ListDevices(ctx)
			s.Health(ctx)
			time.Sleep(time.Millisecond)
		}
	}()
	d, err := s.ImportProject(ctx, designer, []byte(v2))
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	want := gateway.ProjectChanges{Tags: gateway.ChangeSet{Added: []string{"L/New"}, Changed: []string{"L/Set"}, Removed: []string{"L/Gone"}}}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("changes = %+v, want %+v", d, want)
	}
	if s.Engine() == old {
		t.Fatal("the tag engine was not replaced")
	}
	// The setpoint kept its value (and the simulator's memory got it back),
	// the ramp keeps flowing, the removed tag is unknown, the new one reads.
	readOne(t, s, "L/Set", func(r tagengine.Result) bool { return good(r) && value.Equal(r.Value, 42.5) })
	first := readOne(t, s, "L/Ramp", good)
	readOne(t, s, "L/Ramp", func(r tagengine.Result) bool { return good(r) && !value.Equal(r.Value, first.Value) })
	readOne(t, s, "L/Gone", func(r tagengine.Result) bool { return r.Quality == value.BadNodeIDUnknown })
	readOne(t, s, "L/New", good)
	if s.Project().Tags[1].Units != "bar" {
		t.Fatalf("running project not replaced: %+v", s.Project().Tags[1])
	}
	// The subscription made before the import sees the new engine's changes.
	deadline := time.After(5 * time.Second)
	for seen := false; !seen; {
		select {
		case v := <-live:
			seen = v.Path == "L/New"
		case <-deadline:
			t.Fatal("the LiveView subscription got no change of the new engine")
		}
	}
	// Kept in the file (a restart re-imports it) and in the store, audited.
	if b, err := os.ReadFile(s.opts.ProjectFile); err != nil || string(b) != v2 {
		t.Fatalf("project file = %q, %v", b, err)
	}
	if st, err := os.Stat(s.opts.ProjectFile); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("project file mode changed: %v %v", st.Mode(), err)
	}
	if doc, err := s.projectDoc(); err != nil || string(doc) != v2 {
		t.Fatalf("stored project = %q, %v", doc, err)
	}
	var rec *store.AuditRecord
	for _, r := range auditRecords(t, s) {
		if r.Action == "project.import" {
			rec = &r
		}
	}
	if rec == nil || rec.Principal != "alice" || !strings.Contains(string(rec.After), `"removed":["L/Gone"]`) {
		t.Fatalf("audit record = %+v", rec)
	}
	// A restart builds the same project from the file.
	s2 := &Service{opts: s.opts, log: quiet, db: s.db, audit: s.audit}
	if err := s2.loadProject(); err != nil || len(s2.Project().Tags) != 3 || s2.Project().Tags[2].Path != "L/New" {
		t.Fatalf("reloaded project %+v, %v", s2.Project(), err)
	}
}

// TestService_ImportProject_BadProjectKeepsOld: every problem is reported
// with its line; the running engine, the file and the store stay.
func TestService_ImportProject_BadProjectKeepsOld(t *testing.T) {
	s := newProjectService(t, projectV1)
	old := s.Engine()
	bad := `devices:
  - {name: sim, driver: sim}
  - {name: x, driver: nosuch}
tags:
  - {path: L/Ramp, device: sim, address: "ramp(0,1000,2s)", type: float64, scna: 1s}
  - {path: L/Set, device: sim, address: "randm(0,1)", type: float64}
  - {path: L/Run, device: sim, address: memory, type: boolean}
  - {path: L/Max, device: simm, address: memory, type: int32}
  - {path: L/Set, device: sim, address: memory, type: int16}
`
	_, err := s.ImportProject(context.Background(), designer, []byte(bad))
	var pe *gateway.ProjectError
	if !errors.As(err, &pe) || !errors.Is(err, gateway.ErrInvalidProject) {
		t.Fatalf("err = %v, want a *ProjectError", err)
	}
	for _, w := range []struct {
		line int
		text string
	}{
		{3, `device "x": unknown driver "nosuch"`},
		{5, `unknown key "scna" in a tag`},
		{6, `"randm"`},
		{7, `unknown type "boolean"`},
		{8, `unknown device "simm"`},
		{9, `defined twice (first at line 6)`},
	} {
		found := false
		for _, p := range pe.Problems {
			found = found || (p.Line == w.line && strings.Contains(p.Message, w.text))
		}
		if !found {
			t.Errorf("no problem at line %d naming %q in:\n%v", w.line, w.text, err)
		}
	}
	if s.Engine() != old {
		t.Fatal("the engine was replaced by a bad project")
	}
	first := readOne(t, s, "L/Ramp", good)
	readOne(t, s, "L/Ramp", func(r tagengine.Result) bool { return good(r) && !value.Equal(r.Value, first.Value) })
	if b, _ := os.ReadFile(s.opts.ProjectFile); string(b) != projectV1 {
		t.Fatalf("project file changed: %q", b)
	}
	if doc, _ := s.projectDoc(); string(doc) != projectV1 {
		t.Fatalf("stored project changed: %q", doc)
	}
	if _, err := s.ImportProject(context.Background(), designer, []byte("devices: [\n")); !errors.Is(err, gateway.ErrInvalidProject) || !strings.Contains(err.Error(), "line") {
		t.Fatalf("YAML syntax error = %v", err)
	}
}

// TestService_ImportTags_AllOrNothing: one bad row among good ones applies
// nothing and names the row's line; the fixed file applies, keeping what
// CSV has no column for.
func TestService_ImportTags_AllOrNothing(t *testing.T) {
	s := newProjectService(t, projectV1)
	ctx := context.Background()
	csv := "path,device,address,type,scale,read_only\n" +
		"L/A,sim,memory,int16,,false\n" +
		"L/B,sim,memory,int16,,false\n" +
		"L/C,simm,memory,int16,,false\n" +
		"L/D,sim,\"ramp(0,1,1s)\",float64,0:10:0:100,true\n" +
		"L/E,sim,\"randm(0,1)\",float64,,\n" +
		"L/Set,sim,memory,float64,2,false\n"
	_, err := s.ImportTags(ctx, designer, "csv", []byte(csv))
	var pe *gateway.ProjectError
	if !errors.As(err, &pe) || len(pe.Problems) != 2 || !strings.HasPrefix(pe.Problems[0].Message, `line 4: tag "L/C": unknown device "simm"`) ||
		!strings.HasPrefix(pe.Problems[1].Message, `line 6: tag "L/E": device "sim"`) {
		t.Fatalf("err = %#v", err)
	}
	res, _ := s.Engine().Read(designer, []string{"L/A", "L/B"})
	if res[0].Quality != value.BadNodeIDUnknown || res[1].Quality != value.BadNodeIDUnknown {
		t.Fatalf("a bad file was half-applied: %+v", res)
	}
	if doc, _ := s.projectDoc(); string(doc) != projectV1 {
		t.Fatalf("stored project changed: %q", doc)
	}
	fixed := strings.Replace(strings.Replace(csv, "simm", "sim", 1), "randm", "random", 1)
	d, err := s.ImportTags(ctx, designer, "csv", []byte(fixed))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Tags.Added, []string{"L/A", "L/B", "L/C", "L/D", "L/E"}) || !reflect.DeepEqual(d.Tags.Changed, []string{"L/Set"}) ||
		len(d.Tags.Removed) != 0 {
		t.Fatalf("diff = %+v", d)
	}
	readOne(t, s, "L/E", good)
	readOne(t, s, "L/Ramp", good)
	p := s.Project()
	set := p.Tags[1]
	if set.Path != "L/Set" || set.History == nil || !set.History.Enabled || set.Scale == nil || *set.Scale.Factor != 2 {
		t.Fatalf("L/Set after a CSV import = %+v (history must be kept)", set)
	}
	// The YAML file keeps its comment, and exports round-trip.
	doc, _ := s.projectDoc()
	if !strings.HasPrefix(string(doc), "# line 1: the plant") {
		t.Fatalf("comment lost:\n%s", doc)
	}
	for _, format := range []string{"csv", "yaml"} {
		out, err := s.ExportTags(ctx, format)
		if err != nil {
			t.Fatal(err)
		}
		d, err := s.ImportTags(ctx, designer, format, out)
		if err != nil || len(d.Tags.Added)+len(d.Tags.Changed)+len(d.Tags.Removed) != 0 {
			t.Fatalf("%s export → import changed %+v, %v\n%s", format, d, err, out)
		}
	}
	var actions []string
	for _, r := range auditRecords(t, s) {
		actions = append(actions, r.Action)
	}
	if strings.Count(strings.Join(actions, ","), "tags.import") != 3 {
		t.Fatalf("audit actions %v, want 3 tags.import", actions)
	}
}

func TestService_BrowseDevice_Errors(t *testing.T) {
	s := newProjectService(t, projectV1)
	a := s
	tests := []struct {
		dev, node string
		want      error
	}{
		{"nope", "", gateway.ErrNotFound},
		{"sim", "", gateway.ErrInvalid},
		{"ua", "gone", gateway.ErrNotFound},
		{"ua", "away", gateway.ErrUnavailable},
		{"ua", "Plc", nil},
	}
	for _, tt := range tests {
		t.Run(tt.dev+"/"+tt.node, func(t *testing.T) {
			res, err := a.BrowseDevice(context.Background(), designer, tt.dev, tt.node)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("err = %v, want %v", err, tt.want)
				}
				return
			}
			if err != nil || len(res) != 1 || res[0].NodeID != "nsu=urn:t;s=Plc.Speed" || !res[0].Writable {
				t.Fatalf("= %+v, %v", res, err)
			}
		})
	}
}

func TestProjectError_Flatten(t *testing.T) {
	_, yerr := config.ParseProject([]byte("tags:\n  - {path: A, device: s, address: m, colour: 1}\n  - {path: B, device: s, address: m, size: 2}\n"))
	tagErr := errors.New("missing device")
	err := errors.Join(yerr,
		errors.New(`/p/project.yaml:9: tag "X": unknown device "d"`),
		wrapJoin(`/p/project.yaml:12: tag "Y": `, tagErr, errors.New(`unknown type "q"`)))
	got := projectError(err).Problems
	want := []gateway.Problem{
		{Line: 2, Message: `line 2: unknown key "colour" in a tag (valid keys: path, device, address, type, byte_order, scan, deadband, scale, units, write_level, read_only, unit_id, description, history, non_finite, string_byte_order, encoding, min, max)`},
		{Line: 3, Message: `line 3: unknown key "size" in a tag (valid keys: path, device, address, type, byte_order, scan, deadband, scale, units, write_level, read_only, unit_id, description, history, non_finite, string_byte_order, encoding, min, max)`},
		{Line: 9, Message: `/p/project.yaml:9: tag "X": unknown device "d"`},
		{Line: 12, Message: `/p/project.yaml:12: tag "Y": missing device`},
		{Line: 12, Message: `/p/project.yaml:12: tag "Y": unknown type "q"`},
	}
	if !reflect.DeepEqual(got, want) {
		b, _ := json.MarshalIndent(got, "", " ")
		t.Fatalf("problems =\n%s", b)
	}
}

func wrapJoin(prefix string, errs ...error) error {
	return &prefixed{prefix: prefix, err: errors.Join(errs...)}
}

type prefixed struct {
	prefix string
	err    error
}

func (p *prefixed) Error() string { return p.prefix + p.err.Error() }
func (p *prefixed) Unwrap() error { return p.err }

// TestService_ImportProject_EmptyDocumentRefused: a document with neither
// devices: nor tags: ("{}", the wrong file) would remove every device and
// tag: refused, nothing changes; an empty project said as such
// ("devices: []", "tags: []") is imported.
func TestService_ImportProject_EmptyDocumentRefused(t *testing.T) {
	s := newProjectService(t, projectV1)
	old := s.Engine()
	for _, doc := range []string{"{}", "", "named_queries: []\n"} {
		_, err := s.ImportProject(context.Background(), designer, []byte(doc))
		if !errors.Is(err, gateway.ErrInvalidProject) || !strings.Contains(err.Error(), `write "devices: []" and "tags: []"`) {
			t.Fatalf("import of %q = %v, want it refused as removing everything", doc, err)
		}
	}
	if s.Engine() != old {
		t.Fatal("a refused empty document replaced the engine")
	}
	ch, err := s.ImportProject(context.Background(), designer, []byte("devices: []\ntags: []\n"))
	if err != nil || len(ch.Devices.Removed) == 0 || len(ch.Tags.Removed) == 0 {
		t.Fatalf("import of an empty project said as such = %+v, %v", ch, err)
	}
}
