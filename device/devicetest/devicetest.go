// Package devicetest holds what driver tests share: Run, the conformance
// suite every device.Driver must pass (docs/architecture.md), and ModbusServer, an
// in-process Modbus TCP server that misbehaves on demand. Only tests import
// it; production code must not.
package devicetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// garbage are addresses no driver accepts.
var garbage = []string{
	"",
	"!!!",
	"no such address",
	"\x00\xff",
	"ramp(1,2",
	"HR100:",
	strings.Repeat("9", 300),
}

// Run checks the lifecycle rules of device.Driver on drivers made by
// newDriver, which returns a fresh driver (built by its Factory, not yet
// opened) and points that driver accepts. Each rule is a subtest:
// Validate passes; CheckPoint accepts the points and rejects garbage
// addresses with an error naming the address; Read returns len(points) VQTs
// with non-zero UTC times, also for no points, concurrently and after Close;
// Close is safe twice, without Open, and after an Open cut short by a
// cancelled context.
func Run(t *testing.T, newDriver func(t *testing.T) (device.Driver, []device.Point)) {
	t.Helper()
	ctx := context.Background()

	t.Run("Validate", func(t *testing.T) {
		d, _ := newDriver(t)
		if err := d.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
	})

	t.Run("CheckPointAccepts", func(t *testing.T) {
		d, points := newDriver(t)
		if len(points) == 0 {
			t.Fatal("newDriver returned no points")
		}
		for _, p := range points {
			if err := d.CheckPoint(p); err != nil {
				t.Errorf("CheckPoint(%q): %v", p.Address, err)
			}
		}
	})

	t.Run("CheckPointRejectsGarbage", func(t *testing.T) {
		d, points := newDriver(t)
		for _, addr := range garbage {
			p := points[0]
			p.Address = addr
			err := d.CheckPoint(p)
			if err == nil {
				t.Errorf("CheckPoint(%q) = nil, want an error", addr)
				continue
			}
			if printable(addr) && !strings.Contains(err.Error(), addr) {
				t.Errorf("CheckPoint(%q) = %q: the error does not name the address", addr, err)
			}
		}
	})

	t.Run("ReadShape", func(t *testing.T) {
		d, points := newDriver(t)
		if err := d.Open(ctx); err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { closeOK(t, d) })
		checkVQTs(t, "Read", d.Read(ctx, points), len(points))
		checkVQTs(t, "Read(nil)", d.Read(ctx, nil), 0)
		bad := append([]device.Point(nil), points...)
		bad[0].Address = "!!!"
		vs := d.Read(ctx, bad)
		checkVQTs(t, "Read with a bad address", vs, len(bad))
		if len(vs) > 0 && !vs[0].Quality.IsBad() {
			t.Errorf("Read of address %q: quality %s, want a Bad quality", "!!!", vs[0].Quality)
		}
	})

	t.Run("ReadConcurrent", func(t *testing.T) {
		d, points := newDriver(t)
		if err := d.Open(ctx); err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { closeOK(t, d) })
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 5 {
					checkVQTs(t, "concurrent Read", d.Read(ctx, points), len(points))
				}
			})
		}
		wg.Wait()
	})

	t.Run("CloseWithoutOpen", func(t *testing.T) {
		d, _ := newDriver(t)
		closeOK(t, d)
		closeOK(t, d)
	})

	t.Run("CloseAfterPartialOpen", func(t *testing.T) {
		d, points := newDriver(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_ = d.Open(cctx) // may fail: the context is cancelled; Close must still be safe
		closeOK(t, d)
		closeOK(t, d)
		checkVQTs(t, "Read after Close", d.Read(ctx, points), len(points))
	})

	t.Run("CloseTwiceAfterOpen", func(t *testing.T) {
		d, points := newDriver(t)
		if err := d.Open(ctx); err != nil {
			t.Fatalf("Open: %v", err)
		}
		checkVQTs(t, "Read", d.Read(ctx, points), len(points))
		closeOK(t, d)
		closeOK(t, d)
		checkVQTs(t, "Read after Close", d.Read(ctx, points), len(points))
	})
}

func closeOK(t *testing.T, d device.Driver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func checkVQTs(t *testing.T, what string, vs []value.VQT, n int) {
	t.Helper()
	if len(vs) != n {
		t.Errorf("%s: %d VQTs, want %d", what, len(vs), n)
		return
	}
	for i, v := range vs {
		if v.Time.IsZero() {
			t.Errorf("%s: VQT %d has a zero time", what, i)
		} else if v.Time.Location() != time.UTC {
			t.Errorf("%s: VQT %d time %v is not UTC", what, i, v.Time)
		}
	}
}

func printable(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// Write is what the tag engine's write path hands a driver: v coerced once
// to p's type (device.Coerce; a refusal is returned as its
// *device.QualityError), then d.Write. Driver tests write through it, as
// the engine does.
func Write(ctx context.Context, d device.Driver, p device.Point, v value.Value) error {
	cv, err := device.Coerce(p, v)
	if err != nil {
		return err
	}
	return d.Write(ctx, p, cv)
}
