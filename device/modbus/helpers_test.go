package modbus

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/device/devicetest"
	"qubiq.dev/edge/value"
)

// Test durations, scaled down from the cases (ratios kept).
const (
	testTimeout = 150 * time.Millisecond
)

// newTestDriver returns an opened driver on srv with a short timeout and a
// fast reconnect backoff; mutate changes the config first.
func newTestDriver(t *testing.T, srv *devicetest.ModbusServer, mutate func(*Config)) *Driver {
	t.Helper()
	c := DefaultConfig
	c.URL = srv.URL()
	c.Timeout = device.Duration(testTimeout)
	if mutate != nil {
		mutate(&c)
	}
	d := newClosedTestDriver(t, c)
	if err := d.Open(context.Background()); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return d
}

func newClosedTestDriver(t *testing.T, c Config) *Driver {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	d := NewDriver("plc1", c, log)
	d.link.bus.backoffMin, d.link.bus.backoffMax = 10*time.Millisecond, 40*time.Millisecond
	t.Cleanup(func() {
		if err := d.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

func pt(addr string, typ value.Type, order string) device.Point {
	return device.Point{Tag: "T/" + addr, Address: addr, Type: typ, ByteOrder: order}
}

func read1(t *testing.T, d *Driver, p device.Point) value.VQT {
	t.Helper()
	return d.Read(context.Background(), []device.Point{p})[0]
}

func wantGood(t *testing.T, what string, v value.VQT, want value.Value) {
	t.Helper()
	if v.Quality != value.Good || v.Value != want {
		t.Errorf("%s = %v %s %q, want Good %v (%T)", what, v.Value, v.Quality, v.Reason, want, want)
	}
	if v.Time.IsZero() || v.Time.Location() != time.UTC {
		t.Errorf("%s: time %v, want a UTC time", what, v.Time)
	}
}

func wantQuality(t *testing.T, what string, v value.VQT, q value.Quality) {
	t.Helper()
	if v.Quality != q {
		t.Errorf("%s = %v %s %q, want %s", what, v.Value, v.Quality, v.Reason, q)
	}
}

func qualityErr(t *testing.T, err error) *device.QualityError {
	t.Helper()
	var qe *device.QualityError
	if !errors.As(err, &qe) {
		t.Fatalf("error %v (%T) is not a *device.QualityError", err, err)
	}
	return qe
}
