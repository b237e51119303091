//go:build integration

package integration

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"qubiq.dev/edge/store"
	"qubiq.dev/edge/value"
)

// seedHistory writes 24 h of history for the panel's trend tags into the
// stopped daemon's store, as the daemon records it, so the long trend has
// a day to show: Line1/Speed a slow wave sampled every minute with one
// hour of Bad_NotConnected (a gap), Line1/Setpoint steps every 3 h,
// Line1/Run switching every 2 h (drawn in steps). It ends two minutes ago.
func seedHistory(t *testing.T, d *daemon) {
	t.Helper()
	db, err := store.Open(filepath.Join(d.dir, "data", "qubiq.db"), store.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h, err := store.OpenHistory(db, store.HistoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().UTC().Add(-2 * time.Minute).Truncate(time.Minute)
	start := end.Add(-24 * time.Hour)
	rec := func(path string, s store.Sample) {
		if !h.Record(path, s) {
			t.Fatalf("history queue refused a sample of %s", path)
		}
	}
	for i := 0; i <= 24*60; i++ {
		ts := start.Add(time.Duration(i) * time.Minute)
		if i >= 600 && i < 660 {
			rec("Line1/Speed", store.Sample{Time: ts, Quality: value.BadNotConnected})
			continue
		}
		rec("Line1/Speed", store.Sample{Time: ts, Value: 50 + 35*math.Sin(float64(i)/120) + 5*math.Sin(float64(i)/7), Quality: value.Good})
	}
	for i := 0; i < 8; i++ {
		rec("Line1/Setpoint", store.Sample{Time: start.Add(time.Duration(i) * 3 * time.Hour), Value: float64(30 + 10*(i%4)), Quality: value.Good})
	}
	for i := 0; i < 12; i++ {
		rec("Line1/Run", store.Sample{Time: start.Add(time.Duration(i) * 2 * time.Hour), Value: i%2 == 0, Quality: value.Good})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
