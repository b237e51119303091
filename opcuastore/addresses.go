package opcuastore

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/device/opcua"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/tagengine"
)

// OPC UA addresses in the ns= form are converted to the nsu= form at the
// first successful connection and stored that way (README: OPC UA
// devices): a server that re-orders its namespaces later cannot move a
// tag to another node. The driver converts them in memory
// (opcua.Driver.ResolvedAddresses); the daemon persists the conversion in
// the store's meta under metaResolvedPrefix+<device> and applies it when it
// builds the tags at the next start. The project file is not rewritten;
// the tag list shows the converted address (Shown).

// metaResolvedPrefix + a device name is the store meta key of the device's
// converted addresses: a JSON object tag path → resolvedAddr.
const metaResolvedPrefix = "opcua_resolved/"

// resolvedAddr is one tag's converted address. Address is the ns= form the
// project names; a stored conversion applies only while the project still
// names that address (an edited address is converted afresh).
type resolvedAddr struct {
	Address  string `json:"address"`  // "ns=2;s=Speed"
	Resolved string `json:"resolved"` // "nsu=urn:vendor:plc;s=Speed"
}

// addressResolver is the optional extra of a driver that converts addresses
// at its first connection (opcua.Driver).
type addressResolver interface {
	ResolvedAddresses() map[string]string
}

// WatchEvery is how often Watch asks the drivers for conversions until
// every ns= address is converted.
const WatchEvery = time.Second

// NewAddresses returns the address book over db's meta, its watch asking
// the drivers every WatchEvery.
func NewAddresses(db *store.DB, log *slog.Logger) *Addresses {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Addresses{db: db, log: log, every: WatchEvery}
}

// Addresses holds the conversions of the running system
// (service.AddressBook): the ones made since start (Shown), and the ns=
// addresses still waiting for a connection. Build it with NewAddresses.
type Addresses struct {
	db    *store.DB
	log   *slog.Logger
	every time.Duration // how often the watch asks the drivers

	mu      sync.Mutex
	shown   map[string]string                  // tag path → converted address
	pending map[string]map[string]string       // device → tag path → ns= address
	drivers map[string]addressResolver         // device → driver, for pending
	cancel  context.CancelFunc                 // stops the running watch
	done    chan struct{}                      // closed when the watch ends
	loaded  map[string]map[string]resolvedAddr // device → stored conversions
}

// isNSForm reports whether addr is an OPC UA address with a namespace
// index other than 0 (the form that is converted).
func isNSForm(addr string) bool {
	a, err := opcua.ParseAddress(addr)
	return err == nil && !a.HasURI()
}

// loadResolved reads the stored conversions of device (none when absent or
// unreadable: a damaged record is logged and ignored, the project's
// addresses then apply and are converted again).
func loadResolved(db *store.DB, device string, log *slog.Logger) map[string]resolvedAddr {
	raw, err := db.Meta(metaResolvedPrefix + device)
	if err != nil || len(raw) == 0 {
		if err != nil {
			log.Warn("opcua: stored address conversions unreadable; converting again", slog.String("device", device), slog.Any("err", err))
		}
		return map[string]resolvedAddr{}
	}
	m := map[string]resolvedAddr{}
	if err := json.Unmarshal(raw, &m); err != nil {
		log.Warn("opcua: stored address conversions unreadable; converting again", slog.String("device", device), slog.Any("err", err))
		return map[string]resolvedAddr{}
	}
	return m
}

// Apply rewrites, in tags, every ns= address that a previous run
// converted (and the project still names) to its stored nsu= form, and
// records which ns= addresses of address-converting drivers remain, for
// watch. It returns tags, changed in place.
func (r *Addresses) Apply(devs map[string]device.Driver, tags []tagengine.Tag) []tagengine.Tag {
	db, log := r.db, r.log
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = map[string]map[string]string{}
	r.drivers = map[string]addressResolver{}
	r.loaded = map[string]map[string]resolvedAddr{}
	// The tags built here carry the stored conversions themselves; what
	// was shown for the previous build no longer applies.
	r.shown = map[string]string{}
	applied := map[string]int{}
	for i := range tags {
		t := &tags[i]
		ar, ok := devs[t.Device].(addressResolver)
		if !ok || !isNSForm(t.Point.Address) {
			continue
		}
		stored, ok := r.loaded[t.Device]
		if !ok {
			stored = loadResolved(db, t.Device, log)
			r.loaded[t.Device] = stored
		}
		if e, ok := stored[t.Path]; ok && e.Address == t.Point.Address && e.Resolved != "" {
			t.Point.Address = e.Resolved
			applied[t.Device]++
			continue
		}
		if r.pending[t.Device] == nil {
			r.pending[t.Device] = map[string]string{}
			r.drivers[t.Device] = ar
		}
		r.pending[t.Device][t.Path] = t.Point.Address
	}
	for dev, n := range applied {
		log.Info("opcua: tag addresses in the namespace URI form, as converted at an earlier connection",
			slog.String("device", dev), slog.Int("tags", n))
	}
	return tags
}

// Shown returns the converted address of tag path, when it was converted
// since start.
func (r *Addresses) Shown(path string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.shown[path]
	return a, ok
}

// Watch asks, every period, the drivers with ns= addresses still waiting,
// and persists each conversion as it appears; it ends when none is left,
// ctx ends, or Stop. A running watch is replaced.
func (r *Addresses) Watch(ctx context.Context) {
	db, every, log := r.db, r.every, r.log
	r.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	r.cancel, r.done = cancel, done
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if left := r.collect(db, log); left == 0 {
				return
			}
		}
	}()
}

// Stop ends the watch and waits for it.
func (r *Addresses) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel, r.done = nil, nil
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// collect asks each driver with waiting addresses for its conversions,
// persists the new ones (merged with the stored ones) and returns how many
// addresses still wait. A failed store write is logged and retried at the
// next call.
func (r *Addresses) collect(db *store.DB, log *slog.Logger) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	left := 0
	for dev, waiting := range r.pending {
		conv := r.drivers[dev].ResolvedAddresses()
		fresh := map[string]resolvedAddr{}
		for path, addr := range waiting {
			if c, ok := conv[path]; ok && c != addr && !isNSForm(c) {
				fresh[path] = resolvedAddr{Address: addr, Resolved: c}
			}
		}
		if len(fresh) > 0 {
			if err := r.persist(db, dev, fresh); err != nil {
				log.Error("opcua: storing converted addresses failed; retrying", slog.String("device", dev), slog.Any("err", err))
				left += len(waiting)
				continue
			}
			for path, e := range fresh {
				r.shown[path] = e.Resolved
				delete(waiting, path)
			}
			log.Info("opcua: converted addresses stored in the namespace URI form",
				slog.String("device", dev), slog.Int("tags", len(fresh)))
		}
		if len(waiting) == 0 {
			delete(r.pending, dev)
			delete(r.drivers, dev)
		}
		left += len(waiting)
	}
	return left
}

// persist merges fresh into the stored conversions of dev and writes them.
// The caller holds r.mu.
func (r *Addresses) persist(db *store.DB, dev string, fresh map[string]resolvedAddr) error {
	all := map[string]resolvedAddr{}
	for k, v := range r.loaded[dev] {
		all[k] = v
	}
	for k, v := range fresh {
		all[k] = v
	}
	b, err := json.Marshal(all)
	if err != nil {
		return fmt.Errorf("device %q: encode converted addresses: %w", dev, err)
	}
	if err := db.PutMeta(metaResolvedPrefix+dev, b); err != nil {
		return fmt.Errorf("device %q: store converted addresses: %w", dev, err)
	}
	r.loaded[dev] = all
	return nil
}
