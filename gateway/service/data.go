package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/config"
	"qubiq.dev/edge/files"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/internal/yamlnode"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/store/sqldb"

	"gopkg.in/yaml.v3"
)

// data is the data services beyond tags: vars, history, files, SQL
// databases and the project's message handlers.
type data struct {
	s   *Service
	log *slog.Logger

	vars     *store.Vars
	history  *store.History
	files    *files.FS
	sql      *sqldb.Registry
	handlers map[string]messageHandler

	txGrants sync.Map // tx handle → auth.Grant that opened it (for audit)

	feedMu   sync.Mutex
	feedStop func()
	feedDone chan struct{}
	feedDrop func() uint64
}

// messageHandler is one entry of the project's message_handlers: the
// handler name scripts and REST send to, the gateway entry that runs it,
// and an optional restriction of the sender's grant (scopes, write level).
type messageHandler struct {
	Name     string
	Module   string
	Entry    string
	Restrict *auth.Grant
	Line     int
}

// openData opens the data services over the service's store and options:
// system.vars and history in the store, system.files in <data_dir>/files,
// the SQL registry (local.sqlite, connections sealed with secrets.key) with
// the project's connections, named queries and message handlers. Every
// project error is reported, naming the file, line and entry.
func openData(s *Service) (_ *data, err error) {
	d := &data{s: s, log: s.log.With("subsystem", "data"), handlers: map[string]messageHandler{}}
	defer func() {
		if err != nil {
			d.close(context.Background())
		}
	}()
	d.vars = store.NewVars(s.db)
	d.history, err = store.OpenHistory(s.db, store.HistoryOptions{MaxAge: s.opts.HistoryMaxAge, MaxBytes: s.opts.HistoryMaxBytes,
		Logger: s.log.With("subsystem", "history")})
	if err != nil {
		return nil, err
	}
	if d.files, err = files.Open(s.filesDir(), files.Limits{}); err != nil {
		return nil, err
	}
	sec, err := sqldb.LoadSecrets(filepath.Join(s.opts.DataDir, sqldb.KeyFile), s.log)
	if err != nil {
		return nil, err
	}
	d.sql, err = sqldb.Open(sqldb.Options{DataDir: s.opts.DataDir, Secrets: sec, Store: s.db,
		Logger: s.log.With("subsystem", "sqldb"), OnTxExpired: d.txExpired})
	if err != nil {
		return nil, err
	}
	if err := d.loadProject(s.Project()); err != nil {
		return nil, err
	}
	return d, nil
}

// loadProject applies the project's connections, named queries, message
// handlers (tag history policies come with the tags, in the engine).
func (d *data) loadProject(p *config.Project) error {
	if p == nil {
		return nil
	}
	var errs []error
	conns, err := sqldb.ParseConnections(p.File, p.Connections)
	errs = append(errs, err)
	for _, c := range conns {
		conn, err := c.Connection()
		if err == nil {
			err = d.sql.Put(conn)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", p.File, c.Line, err))
		}
	}
	qs, err := sqldb.ParseNamedQueries(p.File, p.NamedQueries)
	errs = append(errs, err)
	d.sql.SetNamedQueries(qs)
	hs, err := parseMessageHandlers(p.File, p.MessageHandlers)
	errs = append(errs, err)
	for _, h := range hs {
		d.handlers[h.Name] = h
	}
	return errors.Join(errs...) // history policies are the tags' own (tagengine.HistoryPolicy)
}

// checkData validates the project's sections the data services own
// (connections, named_queries, message_handlers, tag history) without
// opening anything; each error names the file, line and entry.
func checkData(p *config.Project) error {
	var errs []error
	conns, err := sqldb.ParseConnections(p.File, p.Connections)
	errs = append(errs, err)
	for _, c := range conns {
		if _, err := c.Connection(); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", p.File, c.Line, err))
		}
	}
	_, err = sqldb.ParseNamedQueries(p.File, p.NamedQueries)
	errs = append(errs, err)
	_, err = parseMessageHandlers(p.File, p.MessageHandlers)
	errs = append(errs, err)
	return errors.Join(errs...) // tag history is checked with the tags (config.EngineTags)
}

type messageHandlerYAML struct {
	Name       string   `yaml:"name"`
	Entry      string   `yaml:"entry"`
	Scopes     []string `yaml:"scopes"`
	WriteLevel string   `yaml:"write_level"`
}

// parseMessageHandlers strictly decodes the project's message_handlers:
// {name, entry: module.entry, scopes?: [...], write_level?: level}. scopes
// and write_level restrict the sender's grant for the run (never widen it).
// Every bad entry is reported with the file and line.
func parseMessageHandlers(file string, nodes []yaml.Node) ([]messageHandler, error) {
	var out []messageHandler
	var errs []error
	seen := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		bad := func(name, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s:%d: message handler %q: %s", file, n.Line, name, fmt.Sprintf(format, args...)))
		}
		var y messageHandlerYAML
		if n.Kind != yaml.MappingNode {
			bad("", "want a mapping {name, entry}")
			continue
		}
		if err := yamlnode.DecodeStrict(n, &y); err != nil {
			bad(y.Name, "%s", err)
			continue
		}
		module, entry, perr := gateway.ParseEntry(y.Entry)
		switch {
		case y.Name == "" || len(y.Name) > 64:
			bad(y.Name, "needs a name (at most 64 characters)")
			continue
		case seen[y.Name]:
			bad(y.Name, "defined twice")
			continue
		case perr != nil:
			bad(y.Name, "entry %q: want module.entry", y.Entry)
			continue
		}
		seen[y.Name] = true
		h := messageHandler{Name: y.Name, Module: module, Entry: entry, Line: n.Line}
		if y.Scopes != nil || y.WriteLevel != "" {
			r := auth.Full("", "", "")
			ok := true
			if y.Scopes != nil {
				r.Scopes = nil
				for _, sc := range y.Scopes {
					s, err := auth.ParseScope(sc)
					if err != nil {
						bad(y.Name, "%v", err)
						ok = false
						continue
					}
					r.Scopes = append(r.Scopes, s)
				}
			}
			if y.WriteLevel != "" {
				l, err := auth.ParseLevel(y.WriteLevel)
				if err != nil {
					bad(y.Name, "%v", err)
					ok = false
				}
				r.WriteLevel = l
			}
			if !ok {
				continue
			}
			h.Restrict = &r
		}
		out = append(out, h)
	}
	return out, errors.Join(errs...)
}

// historyFeed is the capacity of the tag engine subscription that feeds
// history; what overflows is counted by the engine (alarms).
const historyFeed = 65536

// startFeed feeds the tag engine's changes to history until stopFeed. The
// subscription outlives a project import (tagengine TakeOver).
func (d *data) startFeed() {
	d.feedMu.Lock()
	defer d.feedMu.Unlock()
	eng := d.s.Engine()
	if eng == nil || d.feedStop != nil {
		return
	}
	ch, dropped, cancel := eng.SubscribeHistory(historyFeed) // what each tag's history policy records
	stop := make(chan struct{})
	done := make(chan struct{})
	d.feedDone, d.feedDrop = done, dropped
	d.feedStop = func() { cancel(); close(stop) }
	go func() {
		defer close(done)
		for {
			select {
			case c := <-ch:
				d.history.Offer(c.Path, c.VQT)
			case <-stop:
				return
			}
		}
	}()
}

// stopFeed stops the history feed and waits for it.
func (d *data) stopFeed() {
	d.feedMu.Lock()
	defer d.feedMu.Unlock()
	if d.feedStop != nil {
		d.feedStop()
		<-d.feedDone
		d.feedStop = nil
	}
}

// close stops the feed and closes history (folding its journal), vars, the
// SQL registry (rolling back open transactions) and the files root.
func (d *data) close(ctx context.Context) {
	d.stopFeed()
	if d.history != nil {
		if err := d.history.Close(ctx); err != nil {
			d.log.Error("close history", slog.Any("err", err))
		}
	}
	if d.vars != nil {
		if err := d.vars.Close(ctx); err != nil {
			d.log.Error("close vars", slog.Any("err", err))
		}
	}
	if d.sql != nil {
		if err := d.sql.Close(); err != nil {
			d.log.Error("close sql connections", slog.Any("err", err))
		}
	}
	if d.files != nil {
		if err := d.files.Close(); err != nil {
			d.log.Error("close files root", slog.Any("err", err))
		}
	}
}

// alarms returns what health must show (events are never dropped
// silently; a failing retention job raises an alarm): history's alarms and
// the changes the history feed lost.
func (d *data) alarms() []string {
	var out []string
	if d.history != nil {
		out = append(out, d.history.Alarms()...)
	}
	d.feedMu.Lock()
	drop := d.feedDrop
	d.feedMu.Unlock()
	if drop != nil {
		if n := drop(); n > 0 {
			out = append(out, fmt.Sprintf("history feed lost %d tag changes (subscription queue full)", n))
		}
	}
	return out
}
