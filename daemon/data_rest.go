package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"qubiq.dev/edge/api"
	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/files"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/store/sqldb"
)

// dataAPI is Data as the REST API sees it (api.Data): the same services
// scripts call, answered in REST's encoding, with the services' errors
// mapped onto the API's sentinels.
type dataAPI struct{ d *Data }

var _ api.Data = dataAPI{}

// DataAPI returns the REST side of d (api.Deps.Data); nil when d is nil.
func DataAPI(d *Data) api.Data {
	if d == nil {
		return nil
	}
	return dataAPI{d}
}

// restErr maps a data service error to the API's sentinels (keeping its
// text): invalid arguments 400, missing things 404, full queues 503;
// refusals (*auth.DeniedError) and script failures pass as they are.
func restErr(err error) error {
	var de *auth.DeniedError
	var se *scriptError
	switch {
	case err == nil, errors.As(err, &de), errors.As(err, &se):
		return err
	case errors.Is(err, errNotFound), errors.Is(err, sqldb.ErrNotFound), errors.Is(err, files.ErrNotFound),
		errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: %v", api.ErrNotFound, err)
	case errors.Is(err, errInvalid), errors.Is(err, sqldb.ErrInvalid), errors.Is(err, store.ErrInvalid),
		errors.Is(err, store.ErrNotNumber), errors.Is(err, files.ErrTooLarge), errors.Is(err, files.ErrIsDir),
		errors.Is(err, files.ErrBadRange), errors.Is(err, sqldb.ErrTooManyRows):
		return fmt.Errorf("%w: %v", api.ErrInvalid, err)
	case errors.Is(err, store.ErrAuditFull), errors.Is(err, store.ErrClosed), errors.Is(err, sqldb.ErrClosed):
		return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	return err
}

func (a dataAPI) RunNamedQuery(ctx context.Context, g auth.Grant, name string, params json.RawMessage, database string) (json.RawMessage, error) {
	rows, err := a.d.runNamed(ctx, g, name, params, database, sqldb.ModeREST)
	return rows, restErr(err)
}

func (a dataAPI) History(ctx context.Context, g auth.Grant, q apitypes.HistoryQuery) ([]apitypes.HistorySeries, error) {
	agg := q.Aggregate
	if agg == "" {
		agg = string(store.AggRaw)
	}
	trs, err := a.d.trends(ctx, g, store.TrendQuery{Paths: q.Paths, Start: q.Start, End: q.End,
		Interval: time.Duration(q.IntervalMS) * time.Millisecond, Aggregate: store.Aggregate(agg)})
	if err != nil {
		return nil, restErr(err)
	}
	out := make([]apitypes.HistorySeries, len(trs))
	for i, tr := range trs {
		hs := apitypes.HistorySeries{Path: tr.Path, Aggregate: string(tr.Aggregate), Bad: tr.Bad, Known: tr.Known,
			Points: make([]apitypes.HistoryPoint, len(tr.Points))}
		if tr.Interval > 0 {
			ms := tr.Interval.Milliseconds()
			hs.IntervalMS = &ms
		}
		for j, p := range tr.Points {
			hs.Points[j] = apitypes.HistoryPoint{Timestamp: p.Time, Value: p.Value, Quality: p.Quality.String(), StatusCode: p.StatusCode}
		}
		out[i] = hs
	}
	return out, nil
}

func (a dataAPI) GetVar(_ context.Context, _ auth.Grant, key string) (json.RawMessage, error) {
	v, ok, err := a.d.varsGet(key)
	if err != nil {
		return nil, restErr(err)
	}
	if !ok {
		return nil, fmt.Errorf("var %q: %w", key, api.ErrNotFound)
	}
	return v, nil
}

func (a dataAPI) SetVar(ctx context.Context, g auth.Grant, key string, v json.RawMessage) error {
	return restErr(a.d.varsSet(ctx, g, key, v))
}

func (a dataAPI) DeleteVar(ctx context.Context, g auth.Grant, key string) error {
	ok, err := a.d.varsDelete(ctx, g, key)
	if err != nil {
		return restErr(err)
	}
	if !ok {
		return fmt.Errorf("var %q: %w", key, api.ErrNotFound)
	}
	return nil
}

func (a dataAPI) IncrVar(ctx context.Context, g auth.Grant, key string, by json.Number) (json.RawMessage, error) {
	v, err := a.d.varsIncr(ctx, g, key, by)
	return v, restErr(err)
}

func (a dataAPI) ReadFile(_ context.Context, g auth.Grant, path string, off, n int64) ([]byte, error) {
	var b []byte
	var err error
	if n < 0 {
		b, err = a.d.filesRead(g, path)
	} else {
		b, err = a.d.filesChunk(g, path, off, n)
	}
	return b, restErr(err)
}

func (a dataAPI) SaveFile(_ context.Context, g auth.Grant, path string, data []byte) error {
	return restErr(a.d.filesSave(g, path, data))
}

func (a dataAPI) DeleteFile(_ context.Context, g auth.Grant, path string) error {
	return restErr(a.d.filesDelete(g, path))
}

func (a dataAPI) SendMessage(ctx context.Context, g auth.Grant, handler string, payload json.RawMessage) (apitypes.ScriptRun, error) {
	run, err := a.d.sendMessage(ctx, g, handler, payload)
	var nd nestedDenied
	if errors.As(err, &nd) {
		return run, nd.DeniedError
	}
	return run, restErr(err)
}

func (a dataAPI) MaxFileBytes() int64 { return a.d.Files.Limits().MaxFileBytes }
