package client_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"qubiq.dev/edge/api"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/client"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/value"
)

// memAlarms is a gateway.Alarms holding one alarm; it records what the
// routes asked for.
type memAlarms struct {
	filter gateway.AlarmFilter
	query  gateway.AlarmJournalQuery
	window time.Duration
	shelve time.Duration
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func (m *memAlarms) ListAlarms(_ context.Context, _ auth.Grant, f gateway.AlarmFilter) (gateway.AlarmList, error) {
	m.filter = f
	return gateway.AlarmList{Alarms: []gateway.Alarm{{ID: "A/B:High", Source: "A/B", State: "active_unacked", Priority: "critical",
		Active: true, Value: uint64(18446744073709551615), Quality: value.Good, ActiveSince: t0, AckLevel: auth.LevelOperate,
		ShelveLevel: auth.LevelSupervise}}, Unacked: 1, Active: 1, Highest: "critical"}, nil
}
func (m *memAlarms) AlarmJournal(_ context.Context, _ auth.Grant, q gateway.AlarmJournalQuery) (gateway.AlarmJournalPage, error) {
	m.query = q
	return gateway.AlarmJournalPage{Entries: []gateway.AlarmJournalEntry{{Seq: 5, At: t0, ID: "A/B:High", Event: "activate", To: "active_unacked"}}}, nil
}
func (m *memAlarms) AlarmStats(_ context.Context, _ auth.Grant, w time.Duration) (gateway.AlarmStats, error) {
	m.window = w
	return gateway.AlarmStats{Window: w, Floods: 2}, nil
}
func (m *memAlarms) AckAlarms(_ context.Context, _ auth.Grant, ids []string, all bool) ([]gateway.AlarmResult, error) {
	return []gateway.AlarmResult{{ID: "A/B:High", Status: value.Good}}, nil
}
func (m *memAlarms) ShelveAlarms(_ context.Context, _ auth.Grant, ids []string, d time.Duration, oneShot bool) ([]gateway.AlarmResult, error) {
	m.shelve = d
	return []gateway.AlarmResult{{ID: ids[0], Status: value.Good}}, nil
}
func (m *memAlarms) UnshelveAlarms(context.Context, auth.Grant, []string) ([]gateway.AlarmResult, error) {
	return []gateway.AlarmResult{}, nil
}
func (m *memAlarms) AddAlarmNote(context.Context, auth.Grant, string, string) error { return nil }
func (m *memAlarms) AlarmSummary(context.Context, auth.Grant) (gateway.AlarmSummary, error) {
	return gateway.AlarmSummary{}, nil
}
func (m *memAlarms) SubscribeAlarms(auth.Grant, int) (<-chan gateway.AlarmEvent, func() uint64, func()) {
	return make(chan gateway.AlarmEvent), func() uint64 { return 0 }, func() {}
}
func (m *memAlarms) AlarmMetrics(context.Context) gateway.AlarmMetrics { return gateway.AlarmMetrics{} }

type fullAuth struct{}

func (fullAuth) Authenticate(context.Context, string) (auth.Grant, error) {
	return auth.Full("t", auth.RealmPlatform, "rest"), nil
}

func TestClient_Alarms_RoundTrip(t *testing.T) {
	m := &memAlarms{}
	s, err := api.New(api.Config{}, api.Deps{Auth: fullAuth{}, Alarms: m}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	c, err := client.New(ts.URL, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	list, err := c.ListAlarms(ctx, client.AlarmFilter{States: []string{"active_unacked", "rtn_unacked"}, Prefix: "A", IncludeNormal: true})
	if err != nil || len(list.Alarms) != 1 || list.Highest == nil || *list.Highest != "critical" || list.Alarms[0].ActiveSince == nil ||
		!list.Alarms[0].ActiveSince.Equal(t0) || string(list.Alarms[0].Value) != "18446744073709551615" || list.Alarms[0].Shelved != nil {
		t.Fatalf("list %+v %v", list, err)
	}
	if len(m.filter.States) != 2 || m.filter.Prefix != "A" || !m.filter.IncludeNormal {
		t.Errorf("filter %+v", m.filter)
	}
	page, err := c.AlarmJournal(ctx, client.AlarmJournalQuery{From: t0, Path: "A/B", After: 4, Desc: true, Limit: 10})
	if err != nil || len(page.Entries) != 1 || page.Entries[0].Seq != 5 || page.Next != nil {
		t.Fatalf("journal %+v %v", page, err)
	}
	if !m.query.From.Equal(t0) || m.query.Path != "A/B" || m.query.After != 4 || !m.query.Desc || m.query.Limit != 10 {
		t.Errorf("query %+v", m.query)
	}
	st, err := c.AlarmStats(ctx, 24*time.Hour)
	if err != nil || st.WindowH != 24 || st.Floods != 2 || m.window != 24*time.Hour {
		t.Errorf("stats %+v %v (window %s)", st, err, m.window)
	}
	if res, err := c.AckAlarms(ctx, []string{"A/B:High"}, false); err != nil || len(res) != 1 || res[0].Status != "Good" {
		t.Errorf("ack %+v %v", res, err)
	}
	if _, err := c.ShelveAlarms(ctx, []string{"A/B:High"}, 90*time.Minute, false); err != nil || m.shelve != 90*time.Minute {
		t.Errorf("shelve %v (%s)", err, m.shelve)
	}
	if err := c.AddAlarmNote(ctx, "A/B:High", "hi"); err != nil {
		t.Error(err)
	}
}
