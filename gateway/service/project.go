package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/internal/atomicfile"
	"qubiq.dev/edge/store/sqldb"
	"qubiq.dev/edge/tagengine"
	"qubiq.dev/edge/value"
)

// Project import without a restart (gateway.Project).
//
// The store is the source of truth of the running project: an import is
// kept there ({"version": 1, "yaml": ..., "file": ...}), and when the
// daemon config names a project file (which is imported at every start,
// upsert), the import is also written to that file, atomically, so a
// restart does not revert it.

// projectFile is where the project lives: the config's project file, else
// <data_dir>/project.yaml (never written: the store alone holds the
// project; script files resolve against its directory).
func (s *Service) projectFile() string {
	if s.opts.ProjectFile != "" {
		return s.opts.ProjectFile
	}
	return filepath.Join(s.opts.DataDir, "project.yaml")
}

// loadProject reads the project file named by the config and keeps a copy
// in the store; without a file, the stored project is used.
func (s *Service) loadProject() error {
	if s.opts.ProjectFile != "" {
		p, err := config.LoadProject(s.opts.ProjectFile)
		if err != nil {
			return err
		}
		raw, err := os.ReadFile(s.opts.ProjectFile)
		if err != nil {
			return err
		}
		doc, err := json.Marshal(map[string]any{"version": 1, "yaml": string(raw), "file": s.opts.ProjectFile})
		if err != nil {
			return err
		}
		if err := s.db.PutProject(doc); err != nil {
			return err
		}
		s.setProject(p)
		return nil
	}
	s.setProject(&config.Project{File: s.projectFile()})
	doc, err := s.projectDoc()
	if err != nil || doc == nil {
		return err
	}
	p, err := config.ParseProject(doc)
	if err != nil {
		return fmt.Errorf("stored project: %w", err)
	}
	p.File = s.projectFile()
	s.setProject(p)
	return nil
}

// projectDoc returns the running project document as stored (YAML), or
// nil when the store holds none.
func (s *Service) projectDoc() ([]byte, error) {
	doc, err := s.db.Project()
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

// buildEngine builds the running project's drivers and tag engine and
// seeds it with the stored last values.
func (s *Service) buildEngine() error {
	eng, err := s.newEngine(s.Project())
	if err != nil {
		return err
	}
	last, err := s.db.LoadLastValues()
	if err != nil {
		return err
	}
	// Paths the project lacks are not deleted here: a start on an empty
	// or wrong project file (which an import refuses) would delete every
	// tag's. An import deletes the tags it removes (applyProject).
	eng.Seed(last)
	s.engine.Store(eng)
	return nil
}

// deleteLastValues deletes the stored last values of paths, tags an
// import removed (why says so in the log): else a tag of
// the same path added later would be seeded at the next start with the
// removed one's VQT, and the store would keep and load every removed
// tag's for ever. A failure is logged; it leaves values nothing reads.
func (s *Service) deleteLastValues(paths []string, why string) {
	if len(paths) == 0 {
		return
	}
	if err := s.db.DeleteLastValues(paths...); err != nil {
		s.log.Warn("last values of removed tags not deleted", slog.Int("tags", len(paths)), slog.Any("err", err))
		return
	}
	s.log.Info("last values deleted: tags "+why, slog.Int("tags", len(paths)))
}

// newEngine builds the drivers and the tag engine of p (not started).
func (s *Service) newEngine(p *config.Project) (*tagengine.Engine, error) {
	devs, err := BuildDevices(p, s.opts.DeviceDefaults, s.log)
	if err != nil {
		return nil, err
	}
	tags, err := p.EngineTags()
	if err != nil {
		return nil, err
	}
	if err := checkTags(p, devs); err != nil {
		return nil, err
	}
	if s.opts.Addresses != nil {
		tags = s.opts.Addresses.Apply(devs, tags) // addresses converted at an earlier start
	}
	eng, err := tagengine.New(tagengine.Config{
		Baseline:   s.opts.Baseline,
		LastValues: s.db,
		Audit:      engineAudit{s},
		FlushEvery: s.opts.LastValuesEvery,
		Logger:     s.log.With("subsystem", "tagengine"),
	}, devs, tags)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.File, err)
	}
	return eng, nil
}

// check validates p as --check-config does: the service's sections, then
// the other parts' (Options.SectionChecks: the LiveView views).
func (s *Service) check(p *config.Project) error {
	errs := []error{CheckProject(p, s.opts.DeviceDefaults, s.log)}
	for _, c := range s.opts.SectionChecks {
		errs = append(errs, c(p))
	}
	return errors.Join(errs...)
}

// liveSections are the project sections besides devices and tags that an
// import applies at once.
var liveSections = []string{"named_queries"}

// ImportProject replaces the running project with doc (gateway.Project).
//
// doc is validated like qubiqd --check-config; on any problem the answer is
// a *gateway.ProjectError with every problem and its line, and nothing is
// applied. Else doc is written to the configured project file (atomically)
// and kept in the store, the new drivers and tag engine are built, the
// running engine is stopped and the new one takes over
// (tagengine.Engine.TakeOver: subscribers keep their subscriptions;
// unchanged tags keep their VQT; removed tags read Bad_NodeIdUnknown) and
// started; tag history policies and named queries apply at once; the other
// changed sections take effect at the next start. The import is audited
// ("project.import").
func (s *Service) ImportProject(ctx context.Context, g auth.Grant, doc []byte) (gateway.ProjectChanges, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	d, err := s.applyProject(ctx, g, doc, "project.import")
	if err != nil {
		return gateway.ProjectChanges{}, err
	}
	return changesOf(d), nil
}

// applyProject is ImportProject with s.applyMu held; action names the
// audit record. It returns what changed.
func (s *Service) applyProject(ctx context.Context, g auth.Grant, doc []byte, action string) (config.ProjectDiff, error) {
	p, perr := config.ParseProject(doc)
	if p == nil {
		return config.ProjectDiff{}, projectError(perr)
	}
	p.File = s.projectFile()
	old := s.Project() // with its tags: decoded again once released (projecttags.go), so once
	if err := errors.Join(perr, s.check(p), emptyImport(doc, p, old)); err != nil {
		return config.ProjectDiff{}, projectError(err)
	}
	for _, c := range s.opts.GrantChecks {
		if err := c(g, p); err != nil {
			return config.ProjectDiff{}, err
		}
	}
	eng, err := s.newEngine(p)
	if err != nil {
		return config.ProjectDiff{}, projectError(err)
	}
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
			s.log.Error("project import: restoring the previous project failed", slog.Any("err", rerr))
		}
		if rerr := s.restoreEngine(ctx, old); rerr != nil {
			s.log.Error("project import: restarting the previous tag engine failed", slog.Any("err", rerr))
		}
		return diff, fmt.Errorf("project import: start the new tag engine: %w", err)
	}
	// After the swap: stopping the old engine persisted its last values,
	// the removed tags' too.
	s.deleteLastValues(diff.TagsRemoved, "removed by "+action)
	s.applyAlarms(p)
	s.setProject(p)
	s.applyData(p)
	if s.opts.Addresses != nil {
		s.opts.Addresses.Watch(context.WithoutCancel(ctx))
	}
	detail := map[string]any{
		"devices": map[string]any{"added": auditList(diff.DevicesAdded), "changed": auditList(diff.DevicesChanged), "removed": auditList(diff.DevicesRemoved)},
		"tags":    map[string]any{"added": auditList(diff.TagsAdded), "changed": auditList(diff.TagsChanged), "removed": auditList(diff.TagsRemoved)},
		"file":    s.opts.ProjectFile, "restart_required": restartRequired(diff),
	}
	s.auditAdmin(g, action, "project", detail)
	s.log.Info("project applied", slog.String("action", action), slog.String("principal", g.Principal),
		slog.Int("tags", len(p.Tags)), slog.Int("tags_added", len(diff.TagsAdded)), slog.Int("tags_changed", len(diff.TagsChanged)),
		slog.Int("tags_removed", len(diff.TagsRemoved)), slog.Any("restart_required", restartRequired(diff)))
	s.releaseTags() // applied: the engine, alarms and data hold what they need
	return diff, nil
}

// emptyImport refuses a document that names neither devices: nor tags:
// (such as "{}", or the wrong file) while the running project has some: it
// would remove every device and tag, and their last values with them. An
// empty project is imported by saying so, "devices: []" and "tags: []",
// as ExportProject writes one (docs/project.md, "Import").
func emptyImport(doc []byte, p, old *config.Project) error {
	if len(p.Devices) > 0 || len(p.Tags) > 0 || old == nil || len(old.Devices)+len(old.Tags) == 0 {
		return nil
	}
	var root yaml.Node
	if yaml.Unmarshal(doc, &root) == nil && len(root.Content) > 0 && root.Content[0].Kind == yaml.MappingNode {
		m := root.Content[0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			if k := m.Content[i].Value; k == "devices" || k == "tags" {
				return nil
			}
		}
	}
	return fmt.Errorf("the document has no devices: and no tags: section: importing it would remove all %d devices and %d tags; "+
		"to import an empty project write \"devices: []\" and \"tags: []\"", len(old.Devices), len(old.Tags))
}

// maxAuditNames caps the names an import's audit record lists per change
// kind; beyond it the record holds the count and the first names.
const maxAuditNames = 100

// auditList is names for an audit record: the list, or when longer than
// maxAuditNames {"count": n, "first": [...]}.
func auditList(names []string) any {
	if len(names) <= maxAuditNames {
		if names == nil {
			return []string{}
		}
		return names
	}
	return map[string]any{"count": len(names), "first": names[:maxAuditNames]}
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

func changesOf(d config.ProjectDiff) gateway.ProjectChanges {
	return gateway.ProjectChanges{
		Devices:         gateway.ChangeSet{Added: d.DevicesAdded, Changed: d.DevicesChanged, Removed: d.DevicesRemoved},
		Tags:            gateway.ChangeSet{Added: d.TagsAdded, Changed: d.TagsChanged, Removed: d.TagsRemoved},
		RestartRequired: restartRequired(d),
	}
}

// swapEngine stops the running engine, lets next take over (keepDevice:
// the devices whose config did not change) and starts it. On a failed
// start next is stopped again and the error returned; the caller restores.
func (s *Service) swapEngine(ctx context.Context, next *tagengine.Engine, keepDevice func(string) bool) error {
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if old := s.Engine(); old != nil {
		if err := old.Stop(stopCtx); err != nil {
			s.log.Warn("project import: stopping the previous tag engine", slog.Any("err", err))
		}
		next.TakeOver(old, keepDevice)
	}
	if err := next.Start(context.WithoutCancel(ctx)); err != nil {
		if serr := next.Stop(stopCtx); serr != nil {
			s.log.Warn("project import: stopping the new tag engine", slog.Any("err", serr))
		}
		return err
	}
	s.engine.Store(next)
	return nil
}

// restoreEngine builds and starts the engine of p again, after a new one
// failed to start.
func (s *Service) restoreEngine(ctx context.Context, p *config.Project) error {
	eng, err := s.newEngine(p)
	if err != nil {
		return err
	}
	return s.swapEngine(ctx, eng, nil)
}

// applyData applies the project's sections the data services take at
// once: named queries (checked already; tag history policies come with the
// tags, in the new engine).
func (s *Service) applyData(p *config.Project) {
	if s.data == nil {
		return
	}
	qs, err := sqldb.ParseNamedQueries(p.File, p.NamedQueries)
	if err != nil {
		s.log.Error("project import: named queries", slog.Any("err", err))
	}
	s.data.sql.SetNamedQueries(qs)
}

// persistProject writes doc to the configured project file (atomically,
// keeping the file's mode) and to the store.
func (s *Service) persistProject(doc []byte) error {
	if f := s.opts.ProjectFile; f != "" {
		mode := os.FileMode(0o644)
		if st, err := os.Stat(f); err == nil {
			mode = st.Mode().Perm()
		}
		if err := atomicfile.WriteFile(f, doc, mode); err != nil {
			return fmt.Errorf("project file: %w", err)
		}
	}
	rec, err := json.Marshal(map[string]any{"version": 1, "yaml": string(doc), "file": s.opts.ProjectFile})
	if err != nil {
		return err
	}
	if err := s.db.PutProject(rec); err != nil {
		return fmt.Errorf("store project: %w", err)
	}
	return nil
}

// ImportTags upserts tags into the running project by path (format "csv":
// config.ReadTagsCSV; "yaml": config.ReadTagsYAML) and applies the result
// as ImportProject does (audit action "tags.import"). The whole file is
// checked in one pass: every bad row, an unknown device or an address the
// device's driver refuses, is a problem naming its line in doc, and on any
// problem nothing is applied. A CSV row replaces the tag of its path but
// keeps the keys whose column the file lacks; a YAML entry replaces it
// whole. The project keeps at most config.MaxTagsPerProject tags.
func (s *Service) ImportTags(ctx context.Context, g auth.Grant, format string, doc []byte) (gateway.ProjectChanges, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	cur := s.Project()
	devs, _ := BuildDevices(cur, s.opts.DeviceDefaults, s.log) // the running project's devices built before
	names := make([]string, 0, len(cur.Devices))
	for _, d := range cur.Devices {
		names = append(names, d.Name)
	}
	existing := make(map[string]config.TagConfig, len(cur.Tags))
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
		return gateway.ProjectChanges{}, fmt.Errorf("%w: format %q: want csv or yaml", gateway.ErrInvalid, format)
	}
	if err != nil {
		return gateway.ProjectChanges{}, projectError(err)
	}
	added := 0
	for _, r := range rows {
		if _, ok := existing[r.Path]; !ok {
			added++
		}
	}
	if n := len(cur.Tags) + added; n > config.MaxTagsPerProject {
		return gateway.ProjectChanges{}, projectError(fmt.Errorf("the project would have %d tags, over the limit of %d (docs/limits.md)",
			n, config.MaxTagsPerProject))
	}
	curDoc, err := s.projectDoc()
	if err != nil {
		return gateway.ProjectChanges{}, err
	}
	merged, err := config.UpsertTags(curDoc, rows)
	if err != nil {
		return gateway.ProjectChanges{}, err
	}
	d, err := s.applyProject(ctx, g, merged, "tags.import")
	if err != nil {
		return gateway.ProjectChanges{}, err
	}
	return changesOf(d), nil
}

// ExportTags returns the running project's tags as a CSV or YAML tag file
// (gateway.Project).
func (s *Service) ExportTags(_ context.Context, format string) ([]byte, error) {
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
	return nil, fmt.Errorf("%w: format %q: want csv or yaml", gateway.ErrInvalid, format)
}

// ExportProject returns the running project document as stored (YAML); a
// daemon without a project answers an empty one (gateway.Project).
func (s *Service) ExportProject(context.Context) ([]byte, error) {
	doc, err := s.projectDoc()
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		return []byte("devices: []\ntags: []\n"), nil
	}
	return doc, nil
}

// projectError turns a refused project's errors into a
// *gateway.ProjectError: one problem per message (config.Problems), each
// with the line it names.
func projectError(err error) *gateway.ProjectError {
	msgs := config.Problems(err)
	out := &gateway.ProjectError{Problems: make([]gateway.Problem, len(msgs))}
	for i, m := range msgs {
		out.Problems[i] = gateway.Problem{Line: config.ProblemLine(m), Message: m}
	}
	return out
}

// BrowseDevice returns the children of node in a device's address space
// (gateway.Devices).
func (s *Service) BrowseDevice(ctx context.Context, _ auth.Grant, name, node string) ([]gateway.BrowseNode, error) {
	res, err := s.Engine().Browse(ctx, name, node)
	if err != nil {
		return nil, browseError(err)
	}
	out := make([]gateway.BrowseNode, len(res))
	for i, r := range res {
		out[i] = gateway.BrowseNode{NodeID: r.NodeID, BrowseName: r.BrowseName, NodeClass: r.NodeClass,
			DataType: r.DataType, Writable: r.Writable}
	}
	return out, nil
}

// browseError maps a failed browse onto the gateway's sentinels: an unknown
// device or node not found, a driver that cannot browse or a malformed node
// invalid, a device that cannot answer now unavailable.
func browseError(err error) error {
	switch {
	case errors.Is(err, tagengine.ErrUnknownDevice):
		return fmt.Errorf("%w: %v (GET /api/v1/devices lists them)", gateway.ErrNotFound, err)
	case errors.Is(err, tagengine.ErrNotBrowsable):
		return fmt.Errorf("%w: %v (only OPC UA devices have an address space)", gateway.ErrInvalid, err)
	}
	var qe *device.QualityError
	if !errors.As(err, &qe) {
		return err
	}
	switch qe.Quality {
	case value.BadNodeIDUnknown:
		return fmt.Errorf("%w: %v", gateway.ErrNotFound, err)
	case value.BadConfigurationError, value.BadTypeMismatch, value.BadOutOfRange:
		return fmt.Errorf("%w: %v", gateway.ErrInvalid, err)
	}
	return fmt.Errorf("%w: %v", gateway.ErrUnavailable, err)
}
