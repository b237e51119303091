package service

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// ScriptCode returns each stored version's source, the latest for 0, and
// names what is missing.
func TestService_ScriptCode_Versions(t *testing.T) {
	s := newService(t, testOptions(t, t.TempDir()))
	for _, code := range []string{"def a(args):\n    return 1\n", "def a(args):\n    return 2\n"} {
		if _, err := s.db.SaveScript("pumps", code, nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx, g := context.Background(), auth.Full("des", auth.RealmPlatform, "console")
	latest, err := s.ScriptCode(ctx, g, "pumps", 0)
	if err != nil || latest.Version != 2 || latest.Code != "def a(args):\n    return 2\n" || latest.Saved.IsZero() || latest.Saved.Location() != time.UTC {
		t.Fatalf("latest: %+v %v", latest, err)
	}
	first, err := s.ScriptCode(ctx, g, "pumps", 1)
	if err != nil || first.Version != 1 || first.Code != "def a(args):\n    return 1\n" {
		t.Fatalf("version 1: %+v %v", first, err)
	}
	for _, tc := range []struct {
		module  string
		version int64
		want    error
	}{{"pumps", 3, gateway.ErrNotFound}, {"nosuch", 0, gateway.ErrNotFound}, {"bad-name", 0, gateway.ErrInvalid}, {"pumps", -1, gateway.ErrInvalid}} {
		if _, err := s.ScriptCode(ctx, g, tc.module, tc.version); !errors.Is(err, tc.want) {
			t.Errorf("ScriptCode(%q, %d) = %v, want %v", tc.module, tc.version, err, tc.want)
		}
	}
}

// SearchAudit finds the records still queued, newest first, by each
// filter, pages with Before, and bounds Limit.
func TestService_SearchAudit_Filters(t *testing.T) {
	s := newService(t, testOptions(t, t.TempDir()))
	ctx := context.Background()
	type ev struct{ who, origin, action, result string }
	evs := []ev{
		{"des", "console", "script.save", "ok"},
		{"op1", "liveview:pump1", "liveview.press", "ok"},
		{"des", "script:pumps.start", "script.run", "ok"},
		{"mallory", "rest", "refused", "refused"},
		{"des", "console", "script.rollback", "ok"},
		{"des", "consoleX", "scripts.other", "ok"}, // prefixes match whole segments only
	}
	for _, e := range evs {
		g := auth.Grant{Principal: e.who, Realm: auth.RealmPlatform, Origin: e.origin}
		if err := s.Audit(ctx, g, gateway.AuditEvent{Action: e.action, Target: "t", Result: e.result}); err != nil {
			t.Fatal(err)
		}
	}
	actions := func(q gateway.AuditQuery) []string {
		t.Helper()
		recs, err := s.SearchAudit(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i, r := range recs {
			if i > 0 && r.Seq >= recs[i-1].Seq {
				t.Errorf("not newest first: %d after %d", r.Seq, recs[i-1].Seq)
			}
			out = append(out, r.Action)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    gateway.AuditQuery
		want []string
	}{
		{"everything", gateway.AuditQuery{}, []string{"scripts.other", "script.rollback", "refused", "script.run", "liveview.press", "script.save"}},
		{"principal", gateway.AuditQuery{Principal: "des"}, []string{"scripts.other", "script.rollback", "script.run", "script.save"}},
		{"origin prefix", gateway.AuditQuery{Origin: "console"}, []string{"script.rollback", "script.save"}},
		{"origin of panels", gateway.AuditQuery{Origin: "liveview"}, []string{"liveview.press"}},
		{"kind prefix", gateway.AuditQuery{Action: "script"}, []string{"script.rollback", "script.run", "script.save"}},
		{"kind exact", gateway.AuditQuery{Action: "script.run"}, []string{"script.run"}},
		{"result", gateway.AuditQuery{Result: "refused"}, []string{"refused"}},
		{"limit", gateway.AuditQuery{Limit: 2}, []string{"scripts.other", "script.rollback"}},
		{"until before everything", gateway.AuditQuery{Until: time.Now().Add(-time.Hour)}, nil},
		{"since the start", gateway.AuditQuery{Since: time.Now().Add(-time.Hour), Action: "refused"}, []string{"refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := actions(tc.q); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	// Paging: the next page starts below the last record of this one.
	page1, _ := s.SearchAudit(ctx, gateway.AuditQuery{Limit: 4})
	page2, _ := s.SearchAudit(ctx, gateway.AuditQuery{Limit: 4, Before: page1[len(page1)-1].Seq})
	if len(page1) != 4 || len(page2) != 2 || page2[0].Seq >= page1[3].Seq {
		t.Errorf("pages of 4: %d then %d records", len(page1), len(page2))
	}
	for _, bad := range []int{-1, gateway.MaxAuditSearch + 1} {
		if _, err := s.SearchAudit(ctx, gateway.AuditQuery{Limit: bad}); !errors.Is(err, gateway.ErrInvalid) {
			t.Errorf("limit %d: %v", bad, err)
		}
	}
}
