package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/sandbox"
	"qubiq.dev/edge/tagengine"
	"qubiq.dev/edge/value"
)

// The tag engine under a grant (gateway.Tags).

// ListTags returns the tags g may see, with converted addresses.
func (s *Service) ListTags(_ context.Context, g auth.Grant) []gateway.TagInfo {
	infos := s.Engine().Tags(g)
	out := make([]gateway.TagInfo, len(infos))
	for i, ti := range infos {
		out[i] = gateway.TagInfo{Path: ti.Path, Device: ti.Device, Address: ti.Point.Address, Type: ti.Point.Type,
			Units: ti.Units, WriteLevel: ti.WriteLevel, ReadOnly: ti.ReadOnly, Scan: ti.Scan, Min: ti.Min, Max: ti.Max}
		if s.opts.Addresses != nil {
			if a, ok := s.opts.Addresses.Shown(ti.Path); ok {
				out[i].Address = a // an OPC UA ns= address converted since start
			}
		}
	}
	return out
}

// ReadTags reads one VQT per path; a grant the engine refuses reads every
// path as Bad_UserAccessDenied with the reason.
func (s *Service) ReadTags(_ context.Context, g auth.Grant, paths []string) []gateway.TagValue {
	res, err := s.Engine().Read(g, paths)
	out := make([]gateway.TagValue, len(paths))
	for i, p := range paths {
		if err != nil {
			out[i] = gateway.TagValue{Path: p, VQT: value.Bad(value.BadUserAccessDenied, err.Error(), time.Now())}
			continue
		}
		out[i] = gateway.TagValue{Path: p, VQT: res[i].VQT}
	}
	return out
}

// WriteTags writes through the engine's write path. A failed write-level
// lookup refuses the whole batch, nothing written: the error wraps
// gateway.ErrUnavailable (the caller retries; REST answers 503).
func (s *Service) WriteTags(ctx context.Context, g auth.Grant, writes []gateway.TagWrite) ([]gateway.WriteResult, error) {
	reqs := make([]tagengine.WriteRequest, len(writes))
	for i, w := range writes {
		reqs[i] = tagengine.WriteRequest{Path: w.Path, Value: w.Value}
	}
	res, err := s.Engine().Write(ctx, g, reqs)
	if err != nil {
		if errors.Is(err, tagengine.ErrLevelLookup) {
			return nil, fmt.Errorf("%w: %v", gateway.ErrUnavailable, err)
		}
		return nil, err
	}
	out := make([]gateway.WriteResult, len(res))
	for i, r := range res {
		out[i] = gateway.WriteResult{Path: r.Path, Quality: r.Quality, Reason: r.Reason}
	}
	return out, nil
}

// BrowseTags lists the children of a folder among the tags g may see,
// folders first, each sorted by name.
func (s *Service) BrowseTags(_ context.Context, g auth.Grant, folder string) []gateway.TagNode {
	return browse(s.Engine().Tags(g), folder)
}

func browse(tags []tagengine.TagInfo, path string) []gateway.TagNode {
	path = strings.Trim(path, "/")
	prefix := ""
	if path != "" {
		prefix = path + "/"
	}
	folders := map[string]int{}
	var out []gateway.TagNode
	for _, t := range tags {
		rest, ok := strings.CutPrefix(t.Path, prefix)
		if !ok || rest == "" {
			continue
		}
		if name, _, deeper := strings.Cut(rest, "/"); deeper {
			folders[name]++
			continue
		}
		out = append(out, gateway.TagNode{Name: rest, Path: t.Path, Type: t.Point.Type})
	}
	var fs []gateway.TagNode
	for name, n := range folders {
		fs = append(fs, gateway.TagNode{Name: name, Path: prefix + name, Folder: true, Tags: n})
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return append(fs, out...)
}

// SubscribeValues feeds the changes of the tags g may read, from the tag
// engine's fan-out (which outlives project imports). The engine's
// subscription holds the buf pending changes and counts what it drops;
// this forwarder waits for the consumer rather than dropping, so its own
// channel needs only a little room (a channel of buf would hold buf
// changes' memory for the subscription's life).
func (s *Service) SubscribeValues(g auth.Grant, buf int) (<-chan gateway.TagValue, func() uint64, func()) {
	return s.SubscribeValuesFunc(g, buf, nil)
}

// SubscribeValuesFunc is SubscribeValues for the tags whose path want
// accepts (nil: every tag; tagengine.Engine.SubscribeFunc): the tag engine
// queues nothing else for it. want is called from the scans and must not
// block.
func (s *Service) SubscribeValuesFunc(g auth.Grant, buf int, want func(path string) bool) (<-chan gateway.TagValue, func() uint64, func()) {
	in, engineDropped, unsubscribe := s.Engine().SubscribeFunc(buf, want)
	out := make(chan gateway.TagValue, min(buf, 64))
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case c := <-in:
				if !g.HasScope(auth.TagRead) || !g.AllowsPath(c.Path) {
					continue
				}
				select {
				case out <- gateway.TagValue{Path: c.Path, VQT: c.VQT}:
				case <-stop:
					return
				}
			}
		}
	}()
	var once atomic.Bool
	return out, engineDropped, func() {
		if once.CompareAndSwap(false, true) {
			unsubscribe()
			close(stop)
		}
	}
}

// tagRow is a tag's VQT in the row form of the wire (system.tag.read's
// rows, audit records' "before"): {"path","value","quality","timestamp",
// "reason"?,"status_code"?,"server_timestamp"?}, integers exact, times UTC
// with nanoseconds.
type tagRow struct {
	path string
	v    value.VQT
}

func rowOf(path string, v value.VQT) tagRow { return tagRow{path, v} }

// MarshalJSON encodes the row.
func (r tagRow) MarshalJSON() ([]byte, error) {
	raw, err := value.EncodeJSON(r.v.Value)
	if err != nil {
		return nil, fmt.Errorf("tag %q: %w", r.path, err)
	}
	w := struct {
		Path       string          `json:"path"`
		Value      json.RawMessage `json:"value"`
		Quality    string          `json:"quality"`
		Timestamp  string          `json:"timestamp"`
		Reason     string          `json:"reason,omitempty"`
		StatusCode uint32          `json:"status_code,omitempty"`
		ServerTime string          `json:"server_timestamp,omitempty"`
	}{Path: r.path, Value: raw, Quality: r.v.Quality.String(), Timestamp: r.v.Time.UTC().Format(sandbox.TimeFormat),
		Reason: r.v.Reason, StatusCode: r.v.StatusCode}
	if !r.v.ServerTime.IsZero() {
		w.ServerTime = r.v.ServerTime.UTC().Format(sandbox.TimeFormat)
	}
	return json.Marshal(w)
}
