package gateway

import (
	"testing"
	"time"
)

func TestAuditQuery_Matches(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := AuditRecord{Seq: 10, Time: at, Principal: "des", Origin: "liveview:pump1", Action: "script.run", Result: "ok"}
	for _, tc := range []struct {
		q    AuditQuery
		want bool
	}{
		{AuditQuery{}, true},
		{AuditQuery{Before: 11}, true},
		{AuditQuery{Before: 10}, false},
		{AuditQuery{Principal: "des"}, true},
		{AuditQuery{Principal: "de"}, false},
		{AuditQuery{Origin: "liveview"}, true},
		{AuditQuery{Origin: "liveview:pump1"}, true},
		{AuditQuery{Origin: "live"}, false},
		{AuditQuery{Origin: "liveview:pump"}, false},
		{AuditQuery{Action: "script"}, true},
		{AuditQuery{Action: "scri"}, false},
		{AuditQuery{Action: "script.run.x"}, false},
		{AuditQuery{Result: "ok"}, true},
		{AuditQuery{Result: "refused"}, false},
		{AuditQuery{Since: at, Until: at}, true}, // both bounds inclusive
		{AuditQuery{Since: at.Add(time.Nanosecond)}, false},
		{AuditQuery{Until: at.Add(-time.Nanosecond)}, false},
	} {
		if got := tc.q.Matches(rec); got != tc.want {
			t.Errorf("%+v.Matches = %v, want %v", tc.q, got, tc.want)
		}
	}
}
