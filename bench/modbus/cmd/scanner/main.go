// Command scanner is the system under test of `make bench-modbus`: it builds
// one modbus driver (device/modbus) for the layout the benchmark generated,
// scans its points at a fixed period, and reports each scan's duration, so
// that the benchmark can measure the scanning process alone (CPU seconds
// and peak RSS from /proc, requests on the wire through its counting
// proxy). See bench/README.md.
//
// With -floor it is the benchmark's floor instead: a bare goburrow/modbus
// v0.1.0 TCP client sending the layout's minimal requests back to back
// each period, in the same kind of process, so that the two differ by the
// driver alone.
//
// Protocol on stdin/stdout, one JSON object per line: after Open and one
// warm-up scan it prints {"ready":true}; on any line on stdin it runs the
// configured number of scans, printing {"scan_ns":N,"bad":B} for each, then
// {"done":true}; it exits when stdin closes.
//
// Usage: scanner [-floor] LAYOUT.json
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	gbmodbus "github.com/goburrow/modbus"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/device/modbus"
	"qubiq.dev/edge/value"
)

// Layout is the scanner's input file.
type Layout struct {
	URL                    string         `json:"url"`
	Timeout                string         `json:"timeout"`
	MaxGap                 int            `json:"max_gap"`
	MaxRegistersPerRequest int            `json:"max_registers_per_request"`
	Period                 string         `json:"period"`
	Scans                  int            `json:"scans"`
	Points                 []device.Point `json:"points"`
	// Requests are the minimal requests (start, count of holding
	// registers, unit 1) that -floor sends.
	Requests []struct{ Start, Count uint16 } `json:"requests"`
}

func main() {
	if err := run(context.Background()); err != nil {
		slog.Error("scanner failed", slog.Any("err", err))
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	fs := flag.NewFlagSet("scanner", flag.ContinueOnError)
	floor := fs.Bool("floor", false, "send the minimal requests with a bare goburrow client instead")
	if err := fs.Parse(os.Args[1:]); err != nil || fs.NArg() != 1 {
		return fmt.Errorf("usage: scanner [-floor] LAYOUT.json")
	}
	b, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	var l Layout
	if err := json.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	period, err := time.ParseDuration(l.Period)
	if err != nil {
		return fmt.Errorf("period: %w", err)
	}
	timeout, err := time.ParseDuration(l.Timeout)
	if err != nil {
		return fmt.Errorf("timeout: %w", err)
	}
	if *floor {
		return runFloor(l, period, timeout)
	}
	c := modbus.DefaultConfig
	c.URL, c.Timeout = l.URL, device.Duration(timeout)
	c.MaxGap, c.MaxRegistersPerRequest = l.MaxGap, l.MaxRegistersPerRequest
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d := modbus.NewDriver("bench", c, log)
	if err := d.Open(ctx); err != nil {
		return err
	}
	defer d.Close(ctx)
	for _, p := range l.Points {
		if err := d.CheckPoint(p); err != nil {
			return fmt.Errorf("point %s: %w", p.Tag, err)
		}
	}
	bad := func(vs []value.VQT) int {
		n := 0
		for _, v := range vs {
			if v.Quality != value.Good {
				n++
			}
		}
		return n
	}
	if n := bad(d.Read(ctx, l.Points)); n > 0 {
		return fmt.Errorf("warm-up scan: %d of %d points bad", n, len(l.Points))
	}
	return serve(l.Scans, period, func() int { return bad(d.Read(ctx, l.Points)) })
}

// serve says ready, waits for the go line, runs scan every period, reports
// each, and waits for stdin to close.
func serve(scans int, period time.Duration, scan func() (bad int)) error {
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(map[string]bool{"ready": true}); err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return nil
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for i := 0; i < scans; i++ {
		if i > 0 {
			<-tick.C
		}
		start := time.Now()
		n := scan()
		el := time.Since(start)
		if err := out.Encode(map[string]int64{"scan_ns": el.Nanoseconds(), "bad": int64(n)}); err != nil {
			return err
		}
	}
	if err := out.Encode(map[string]bool{"done": true}); err != nil {
		return err
	}
	for in.Scan() {
	}
	return nil
}

// runFloor is -floor: the minimal requests with goburrow's own TCP client,
// back to back, every period; a failed request counts as one bad point.
func runFloor(l Layout, period, timeout time.Duration) error {
	u, err := url.Parse(l.URL)
	if err != nil {
		return err
	}
	h := gbmodbus.NewTCPClientHandler(u.Host)
	h.SlaveId, h.Timeout = 1, timeout
	if err := h.Connect(); err != nil {
		return err
	}
	defer h.Close()
	c := gbmodbus.NewClient(h)
	scan := func() int {
		bad := 0
		for _, r := range l.Requests {
			if _, err := c.ReadHoldingRegisters(r.Start, r.Count); err != nil {
				bad++
			}
		}
		return bad
	}
	if n := scan(); n > 0 {
		return fmt.Errorf("warm-up scan: %d requests failed", n)
	}
	return serve(l.Scans, period, scan)
}
