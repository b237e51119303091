package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/api"
	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/store/sqldb"
	"qubiq.dev/edge/tagengine"
	"qubiq.dev/edge/value"
)

// Project import without a restart (issues 5 and 6; DESIGN.md REST: POST
// /project/import, GET /project/export, and the tag import and export of
// qubiqctl).
//
// The store is the source of truth of the running project: an import is
// kept there ({"version": 1, "yaml": ..., "file": ...}), and when the
// daemon config names a project file (which is imported at every start,
// upsert), the import is also written to that file, atomically (a
// temporary file renamed over it), so a restart does not revert it.

// ErrInvalidProject is wrapped by a *ProjectError: the project was refused
// and nothing was applied.
var ErrInvalidProject = errors.New("project refused")

// ProjectError refuses a project or tag import: every problem found, each
// naming the file or "line N", the tag or device, and what is wrong.
// Nothing of the import was applied. errors.Is(err, ErrInvalidProject)
// holds.
type ProjectError struct {
	Problems []string
}

// Error returns the problems, one per line.
func (e *ProjectError) Error() string { return strings.Join(e.Problems, "\n") }

// Is reports ErrInvalidProject.
func (e *ProjectError) Is(target error) bool { return target == ErrInvalidProject }

// newProjectError flattens err (errors.Join trees, wrapped joins, YAML
// type errors with one message per line) into one problem per message.
func newProjectError(err error) *ProjectError {
	return &ProjectError{Problems: flatten("", err)}
}

func flatten(prefix string, err error) []string {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, flatten(prefix, e)...)
		}
		return out
	}
	if te, ok := err.(*yaml.TypeError); ok {
		out := make([]string, 0, len(te.Errors))
		for _, e := range te.Errors {
			out = append(out, prefix+strings.TrimSpace(e))
		}
		return out
	}
	msg := err.Error()
	// A wrapper of several problems ("FILE:LINE: tag: %w" around a join
	// or a YAML type error): its own text prefixes each of them.
	if w, ok := err.(interface{ Unwrap() error }); ok {
		if inner := w.Unwrap(); inner != nil && multi(inner) && strings.HasSuffix(msg, inner.Error()) {
			return flatten(prefix+strings.TrimSuffix(msg, inner.Error()), inner)
		}
	}
	var out []string
	for l := range strings.Lines(msg) {
		if l = strings.TrimRight(l, "\n"); strings.TrimSpace(l) != "" {
			out = append(out, prefix+l)
		}
	}
	return out
}

// multi reports whether err holds several problems: a join or a YAML type
// error, possibly wrapped.
func multi(err error) bool {
	for err != nil {
		switch x := err.(type) {
		case interface{ Unwrap() []error }, *yaml.TypeError:
			return true
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		default:
			return false
		}
	}
	return false
}

// projectFile is where the project lives: the config's project file, else
// <data_dir>/project.yaml (never written: the store alone holds the
// project; script files resolve against its directory).
func (s *System) projectFile() string {
	if s.Config.Project != "" {
		return s.Config.Project
	}
	return filepath.Join(s.Config.DataDir, "project.yaml")
}

// projectDoc returns the running project document as stored (YAML), or
// nil when the store holds none.
func (s *System) projectDoc() ([]byte, error) {
	doc, err := s.DB.Project()
	if err != nil || doc == nil {
		return nil, err
	}
	var stored struct {
		YAML string `json:"yaml"`
	}
	if err := json.Unmarshal(doc, &stored); err != nil {
		return nil, fmt.Errorf("stored project: %w", err)
	}
	return []byte(stored.YAML), nil
}

// ApplyProject replaces the running project with doc (the project file,
// YAML or JSON) without a restart.
//
// doc is validated like qubiqd --check-config (config keys, drivers and
// their configs, tags against their drivers, scripts, views, data
// sections, seed users); on any problem it returns a *ProjectError with
// every problem and its line, and nothing is applied. Else doc is written
// to the configured project file (atomically) and kept in the store, the
// new drivers and tag engine are built, the running engine is stopped and
// the new one takes over (tagengine.Engine.TakeOver: subscribers such as
// history recording and the LiveView WebSocket keep their subscriptions;
// unchanged tags keep their VQT; removed tags read Bad_NodeIdUnknown) and
// started; tag history policies and named queries apply at once. Other
// changed sections (scripts, views, users, connections, message handlers,
// flows) take effect at the next start. The import is audited
// ("project.import"). Call it while the system runs (after Run started).
func (s *System) ApplyProject(ctx context.Context, g auth.Grant, doc []byte) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	_, err := s.applyProject(ctx, g, doc, "project.import")
	return err
}

// liveSections are the project sections besides devices and tags that an
// import applies at once.
var liveSections = []string{"named_queries"}

// applyProject is ApplyProject with s.applyMu held; action names the audit
// record. It returns what changed.
func (s *System) applyProject(ctx context.Context, g auth.Grant, doc []byte, action string) (config.ProjectDiff, error) {
	p, perr := config.ParseProject(doc)
	if p == nil {
		return config.ProjectDiff{}, newProjectError(perr)
	}
	p.File = s.projectFile()
	if err := errors.Join(perr, checkProject(p, s.Config.DataDir, s.Log)); err != nil {
		return config.ProjectDiff{}, newProjectError(err)
	}
	eng, devs, err := s.newEngine(p)
	if err != nil {
		return config.ProjectDiff{}, newProjectError(err)
	}
	old := s.Project()
	diff := config.DiffProjects(old, p)
	oldDoc, err := s.projectDoc()
	if err != nil {
		return diff, err
	}
	if err := s.persistProject(doc); err != nil {
		return diff, err
	}
	changed := map[string]bool{}
	for _, d := range diff.DevicesChanged {
		changed[d] = true
	}
	if err := s.swapEngine(ctx, eng, func(name string) bool { return !changed[name] }); err != nil {
		if rerr := s.persistProject(oldDoc); rerr != nil {
			s.Log.Error("project import: restoring the previous project failed", slog.Any("err", rerr))
		}
		if rerr := s.restoreEngine(ctx, old); rerr != nil {
			s.Log.Error("project import: restarting the previous tag engine failed", slog.Any("err", rerr))
		}
		return diff, fmt.Errorf("project import: start the new tag engine: %w", err)
	}
	s.devices = devs
	s.project.Store(p)
	s.applyData(p)
	s.resolved.start(context.WithoutCancel(ctx), s.DB, resolvedWatchEvery, s.Log)
	detail := map[string]any{
		"devices": map[string]any{"added": auditList(diff.DevicesAdded), "changed": auditList(diff.DevicesChanged), "removed": auditList(diff.DevicesRemoved)},
		"tags":    map[string]any{"added": auditList(diff.TagsAdded), "changed": auditList(diff.TagsChanged), "removed": auditList(diff.TagsRemoved)},
		"file":    s.Config.Project, "restart_required": restartRequired(diff),
	}
	s.auditAdmin(g, action, "project", detail)
	s.Log.Info("project applied", slog.String("action", action), slog.String("principal", g.Principal),
		slog.Int("tags", len(p.Tags)), slog.Int("tags_added", len(diff.TagsAdded)), slog.Int("tags_changed", len(diff.TagsChanged)),
		slog.Int("tags_removed", len(diff.TagsRemoved)), slog.Any("restart_required", restartRequired(diff)))
	return diff, nil
}

// maxAuditNames caps the names an import's audit record lists per change
// kind; beyond it the record holds the count and the first names.
const maxAuditNames = 100

// auditList is names for an audit record: the list, or when longer than
// maxAuditNames {"count": n, "first": [...]}.
func auditList(names []string) any {
	if len(names) <= maxAuditNames {
		return nonNilStrings(names)
	}
	return map[string]any{"count": len(names), "first": names[:maxAuditNames]}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// restartRequired lists the changed sections that apply at the next start.
func restartRequired(d config.ProjectDiff) []string {
	var out []string
	for _, sec := range d.Sections {
		if !slices.Contains(liveSections, sec) {
			out = append(out, sec)
		}
	}
	return out
}

// swapEngine stops the running engine, lets next take over (keepDevice:
// the devices whose config did not change) and starts it. On a failed
// start next is stopped again and the error returned; the caller restores.
func (s *System) swapEngine(ctx context.Context, next *tagengine.Engine, keepDevice func(string) bool) error {
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if old := s.Engine(); old != nil {
		if err := old.Stop(stopCtx); err != nil {
			s.Log.Warn("project import: stopping the previous tag engine", slog.Any("err", err))
		}
		next.TakeOver(old, keepDevice)
	}
	if err := next.Start(context.WithoutCancel(ctx)); err != nil {
		if serr := next.Stop(stopCtx); serr != nil {
			s.Log.Warn("project import: stopping the new tag engine", slog.Any("err", serr))
		}
		return err
	}
	s.engine.Store(next)
	return nil
}

// restoreEngine builds and starts the engine of p again, after a new one
// failed to start.
func (s *System) restoreEngine(ctx context.Context, p *config.Project) error {
	eng, _, err := s.newEngine(p)
	if err != nil {
		return err
	}
	return s.swapEngine(ctx, eng, nil)
}

// applyData applies the project's sections the data services take at
// once: named queries (checked already; tag history policies come with
// the tags, in the new engine).
func (s *System) applyData(p *config.Project) {
	if s.Data == nil {
		return
	}
	if s.Data.DB != nil {
		qs, err := sqldb.ParseNamedQueries(p.File, p.NamedQueries)
		if err != nil {
			s.Log.Error("project import: named queries", slog.Any("err", err))
		}
		s.Data.DB.SetNamedQueries(qs)
	}
}

// persistProject writes doc to the configured project file (atomically)
// and to the store. nil doc (no project before) writes an empty project.
func (s *System) persistProject(doc []byte) error {
	if s.Config.Project != "" {
		if err := writeFileAtomic(s.Config.Project, doc, 0o644); err != nil {
			return fmt.Errorf("project file: %w", err)
		}
	}
	rec, err := json.Marshal(map[string]any{"version": 1, "yaml": string(doc), "file": s.Config.Project})
	if err != nil {
		return err
	}
	if err := s.DB.PutProject(rec); err != nil {
		return fmt.Errorf("store project: %w", err)
	}
	return nil
}

// writeFileAtomic writes b to path through a temporary file in the same
// directory, synced and renamed over path, so a reader (or a restart)
// sees the old file or the new one, never a part. The mode of an existing
// file is kept.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		if err := d.Sync(); err != nil {
			d.Close()
			return fmt.Errorf("sync %s: %w", filepath.Dir(path), err)
		}
		return d.Close()
	}
	return nil
}

// ImportTags upserts tags into the running project by path (format "csv":
// config.ReadTagsCSV; "yaml": config.ReadTagsYAML) and applies the result
// as ApplyProject does (audit action "tags.import"). The whole file is
// checked in one pass: every bad row, an unknown device or an address the
// device's driver refuses, is a problem naming its line in doc, and on any
// problem nothing is applied (*ProjectError). A CSV row replaces the tag
// of its path but keeps the keys whose column the file lacks; a YAML entry
// replaces it whole. The project keeps at most config.MaxTagsPerProject
// tags.
func (s *System) ImportTags(ctx context.Context, g auth.Grant, format string, doc []byte) (config.ProjectDiff, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	cur := s.Project()
	devs, _ := BuildDevices(cur, s.Config.DataDir, s.Log) // the running project's devices built before
	names := make([]string, 0, len(cur.Devices))
	existing := make(map[string]config.TagConfig, len(cur.Tags))
	for _, d := range cur.Devices {
		names = append(names, d.Name)
	}
	for _, t := range cur.Tags {
		existing[t.Path] = t
	}
	opt := config.TagImport{Devices: &config.TagDevices{Names: names, Drivers: config.Checkers(devs)}, Existing: existing}
	var rows []config.TagConfig
	var err error
	switch format {
	case "csv":
		rows, err = config.ReadTagsCSV(bytes.NewReader(doc), opt)
	case "yaml":
		rows, err = config.ReadTagsYAML(doc, opt)
	default:
		return config.ProjectDiff{}, fmt.Errorf("%w: format %q: want csv or yaml", api.ErrInvalid, format)
	}
	if err != nil {
		return config.ProjectDiff{}, newProjectError(err)
	}
	added := 0
	for _, r := range rows {
		if _, ok := existing[r.Path]; !ok {
			added++
		}
	}
	if n := len(cur.Tags) + added; n > config.MaxTagsPerProject {
		return config.ProjectDiff{}, newProjectError(fmt.Errorf("the project would have %d tags, over the limit of %d (docs/limits.md)",
			n, config.MaxTagsPerProject))
	}
	curDoc, err := s.projectDoc()
	if err != nil {
		return config.ProjectDiff{}, err
	}
	merged, err := config.UpsertTags(curDoc, rows)
	if err != nil {
		return config.ProjectDiff{}, err
	}
	return s.applyProject(ctx, g, merged, "tags.import")
}

// ExportTags returns the running project's tags as a CSV or YAML tag file
// (config.FormatTagsCSV, config.FormatTagsYAML).
func (s *System) ExportTags(format string) ([]byte, error) {
	tags := s.Project().Tags
	switch format {
	case "csv":
		var buf bytes.Buffer
		if err := config.FormatTagsCSV(&buf, tags); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case "yaml":
		return config.FormatTagsYAML(tags)
	}
	return nil, fmt.Errorf("%w: format %q: want csv or yaml", api.ErrInvalid, format)
}

// ExportProject returns the running project document as stored (YAML); a
// daemon without a project answers an empty one.
func (s *System) ExportProject() ([]byte, error) {
	doc, err := s.projectDoc()
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		return []byte("devices: []\ntags: []\n"), nil
	}
	return doc, nil
}

// checkUsers checks the project's seed users as LiveView seeds them at
// start (seedUsers), without seeding: a bad one would stop the next start.
func checkUsers(p *config.Project) error {
	var errs []error
	for i := range p.Users {
		n := &p.Users[i]
		where := fmt.Sprintf("%s:%d: users[%d]", p.File, n.Line, i)
		if n.Kind != yaml.MappingNode {
			errs = append(errs, fmt.Errorf("%s: want a mapping", where))
			continue
		}
		bad := false
		for j := 0; j+1 < len(n.Content); j += 2 {
			if k := n.Content[j]; !slices.Contains(seedKeys, k.Value) {
				errs = append(errs, fmt.Errorf("%s:%d: unknown key %q (want %s)", p.File, k.Line, k.Value, strings.Join(seedKeys, ", ")))
				bad = true
			}
		}
		var su seedUser
		if err := n.Decode(&su); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		if bad {
			continue
		}
		if _, err := userRecord(su.Name, su.Realm, su.Level, su.Permissions); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
	}
	return errors.Join(errs...)
}

// projectAPI is api.ProjectAdmin over the System.
type projectAPI struct{ s *System }

var _ api.ProjectAdmin = projectAPI{}

func (a projectAPI) ImportProject(ctx context.Context, g auth.Grant, doc []byte) (apitypes.ProjectChanges, error) {
	a.s.applyMu.Lock()
	defer a.s.applyMu.Unlock()
	d, err := a.s.applyProject(ctx, g, doc, "project.import")
	if err != nil {
		return apitypes.ProjectChanges{}, apiProjectError(err)
	}
	return changesOf(d), nil
}

func (a projectAPI) ExportProject(context.Context) ([]byte, error) { return a.s.ExportProject() }

func (a projectAPI) ImportTags(ctx context.Context, g auth.Grant, format string, doc []byte) (apitypes.ProjectChanges, error) {
	d, err := a.s.ImportTags(ctx, g, format, doc)
	if err != nil {
		return apitypes.ProjectChanges{}, apiProjectError(err)
	}
	return changesOf(d), nil
}

func (a projectAPI) ExportTags(_ context.Context, format string) ([]byte, error) {
	return a.s.ExportTags(format)
}

func (a projectAPI) BrowseDevice(ctx context.Context, _ auth.Grant, name, node string) ([]apitypes.BrowseNode, error) {
	res, err := a.s.Engine().Browse(ctx, name, node)
	if err != nil {
		return nil, browseError(err)
	}
	out := make([]apitypes.BrowseNode, len(res))
	for i, r := range res {
		out[i] = apitypes.BrowseNode{NodeID: r.NodeID, BrowseName: r.BrowseName, NodeClass: r.NodeClass,
			DataType: r.DataType, Writable: r.Writable}
	}
	return out, nil
}

// browseError maps a failed browse onto the API's sentinels: an unknown
// device or node 404, a driver that cannot browse or a malformed node 400,
// a device that cannot answer now 503.
func browseError(err error) error {
	switch {
	case errors.Is(err, tagengine.ErrUnknownDevice):
		return fmt.Errorf("%w: %v (GET /api/v1/devices lists them)", api.ErrNotFound, err)
	case errors.Is(err, tagengine.ErrNotBrowsable):
		return fmt.Errorf("%w: %v (only OPC UA devices have an address space)", api.ErrInvalid, err)
	}
	var qe *device.QualityError
	if !errors.As(err, &qe) {
		return err
	}
	switch qe.Quality {
	case value.BadNodeIDUnknown:
		return fmt.Errorf("%w: %v", api.ErrNotFound, err)
	case value.BadConfigurationError, value.BadTypeMismatch, value.BadOutOfRange:
		return fmt.Errorf("%w: %v", api.ErrInvalid, err)
	}
	return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
}

// apiProjectError turns a *ProjectError into the API's (each problem with
// its line); other errors pass through.
func apiProjectError(err error) error {
	var pe *ProjectError
	if !errors.As(err, &pe) {
		return err
	}
	out := &api.ProjectError{Problems: make([]apitypes.ProjectProblem, len(pe.Problems))}
	for i, m := range pe.Problems {
		out.Problems[i] = apitypes.ProjectProblem{Line: lineOf(m), Message: m}
	}
	return out
}

var (
	lineWordRe = regexp.MustCompile(`\bline (\d+)\b`)
	fileLineRe = regexp.MustCompile(`^[^ ]*?:(\d+): `)
)

// lineOf finds the line a problem names: "FILE:12: ..." or "line 12: ...";
// 0 when none.
func lineOf(msg string) int {
	for _, re := range []*regexp.Regexp{fileLineRe, lineWordRe} {
		if m := re.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return 0
}

func changesOf(d config.ProjectDiff) apitypes.ProjectChanges {
	return apitypes.ProjectChanges{
		Devices:         apitypes.ChangeSet{Added: d.DevicesAdded, Changed: d.DevicesChanged, Removed: d.DevicesRemoved},
		Tags:            apitypes.ChangeSet{Added: d.TagsAdded, Changed: d.TagsChanged, Removed: d.TagsRemoved},
		RestartRequired: restartRequired(d),
	}
}
