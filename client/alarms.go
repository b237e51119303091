package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"qubiq.dev/edge/api/apitypes"
)

// AlarmFilter selects the alarms of ListAlarms (GET /api/v1/alarms): the
// states and priorities (any of them), a tag folder or path, and whether
// alarms in state normal are included. The zero filter is the daemon's
// default: the alarms not normal, plus the shelved ones.
type AlarmFilter struct {
	States        []string
	Priorities    []string
	Prefix        string
	IncludeNormal bool
}

// ListAlarms calls GET /api/v1/alarms (scope alarm:read): the alarms, most
// important first, with the counts of unacknowledged and active ones.
func (c *Client) ListAlarms(ctx context.Context, f AlarmFilter) (apitypes.AlarmList, error) {
	q := url.Values{}
	if len(f.States) > 0 {
		q.Set("state", strings.Join(f.States, ","))
	}
	if len(f.Priorities) > 0 {
		q.Set("priority", strings.Join(f.Priorities, ","))
	}
	if f.Prefix != "" {
		q.Set("prefix", f.Prefix)
	}
	if f.IncludeNormal {
		q.Set("include_normal", "true")
	}
	var out apitypes.AlarmList
	err := c.do(ctx, http.MethodGet, withQuery(path("alarms"), q), nil, &out)
	return out, err
}

// AlarmJournalQuery selects journal entries (GET /api/v1/alarms/journal):
// a time range (zero: open), a tag path, folder or alarm id, a priority, a
// state (the entry's "to"), the after of a previous page, newest first,
// and at most Limit entries (0: the daemon's 100; at most 1000).
type AlarmJournalQuery struct {
	From, To time.Time
	Path     string
	Priority string
	State    string
	After    uint64
	Desc     bool
	Limit    int
}

// AlarmJournal calls GET /api/v1/alarms/journal (scope alarm:read).
func (c *Client) AlarmJournal(ctx context.Context, jq AlarmJournalQuery) (apitypes.AlarmJournal, error) {
	q := url.Values{}
	if !jq.From.IsZero() {
		q.Set("from", jq.From.UTC().Format(time.RFC3339Nano))
	}
	if !jq.To.IsZero() {
		q.Set("to", jq.To.UTC().Format(time.RFC3339Nano))
	}
	for k, v := range map[string]string{"path": jq.Path, "priority": jq.Priority, "state": jq.State} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if jq.After > 0 {
		q.Set("after", strconv.FormatUint(jq.After, 10))
	}
	if jq.Desc {
		q.Set("order", "desc")
	}
	if jq.Limit > 0 {
		q.Set("limit", strconv.Itoa(jq.Limit))
	}
	var out apitypes.AlarmJournal
	err := c.do(ctx, http.MethodGet, withQuery(path("alarms", "journal"), q), nil, &out)
	return out, err
}

// AlarmStats calls GET /api/v1/alarms/stats (scope alarm:read): the EEMUA
// 191 figures over the last window (0: the daemon's one hour).
func (c *Client) AlarmStats(ctx context.Context, window time.Duration) (apitypes.AlarmStats, error) {
	q := url.Values{}
	if window > 0 {
		q.Set("window_h", strconv.FormatFloat(window.Hours(), 'f', -1, 64))
	}
	var out apitypes.AlarmStats
	err := c.do(ctx, http.MethodGet, withQuery(path("alarms", "stats"), q), nil, &out)
	return out, err
}

// AckAlarms calls POST /api/v1/alarms/ack (scope alarm:ack): acknowledges
// ids, or with all every unacknowledged alarm the key may see. A level
// refusal is a result, not an error.
func (c *Client) AckAlarms(ctx context.Context, ids []string, all bool) ([]apitypes.AlarmResult, error) {
	var out apitypes.AlarmResults
	err := c.do(ctx, http.MethodPost, path("alarms", "ack"), apitypes.AlarmAckRequest{IDs: ids, All: all}, &out)
	return out.Results, err
}

// ShelveAlarms calls POST /api/v1/alarms/shelve (scope alarm:ack): shelves
// ids for d (whole seconds and fractions), or one-shot.
func (c *Client) ShelveAlarms(ctx context.Context, ids []string, d time.Duration, oneShot bool) ([]apitypes.AlarmResult, error) {
	var out apitypes.AlarmResults
	err := c.do(ctx, http.MethodPost, path("alarms", "shelve"),
		apitypes.AlarmShelveRequest{IDs: ids, DurationS: d.Seconds(), OneShot: oneShot}, &out)
	return out.Results, err
}

// UnshelveAlarms calls POST /api/v1/alarms/unshelve (scope alarm:ack).
func (c *Client) UnshelveAlarms(ctx context.Context, ids []string) ([]apitypes.AlarmResult, error) {
	var out apitypes.AlarmResults
	err := c.do(ctx, http.MethodPost, path("alarms", "unshelve"), apitypes.AlarmUnshelveRequest{IDs: ids}, &out)
	return out.Results, err
}

// AddAlarmNote calls POST /api/v1/alarms/note (scope alarm:ack).
func (c *Client) AddAlarmNote(ctx context.Context, id, text string) error {
	return c.do(ctx, http.MethodPost, path("alarms", "note"), apitypes.AlarmNoteRequest{ID: id, Text: text}, nil)
}

// withQuery appends q to p when it has values.
func withQuery(p string, q url.Values) string {
	if len(q) == 0 {
		return p
	}
	return p + "?" + q.Encode()
}
