package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/client"
)

// The device commands (docs/qubiqctl.md, "devices"): list, show, plan.
// show prints every field GET /api/v1/devices gives for the device,
// including fields this qubiqctl does not know yet (per-device statistics
// of a newer daemon appear there without a new qubiqctl), and for a Modbus
// device the requests its scan sends.
func init() {
	commands["devices list"] = command{name: "devices list",
		help: "List the project's devices: driver, connection state (connected, connecting, degraded, disconnected), tag count, URL and the reason of a state that is not connected.",
		run:  cmdDevicesList}
	commands["devices show"] = command{name: "devices show", args: "DEVICE",
		help: "Show one device: everything the daemon reports about it, and for a Modbus device how many requests each scan class sends.",
		run:  cmdDevicesShow, complete: completeDevices("")}
	commands["devices plan"] = command{name: "devices plan", args: "DEVICE",
		help: "Show the requests one scan of a Modbus device sends, without sending them: scan class, function code, unit, start, count and the tags each serves.",
		run:  cmdDevicesPlan, complete: completeDevices("modbus")}
}

func cmdDevicesList(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	devs, err := c.c.ListDevices(ctx)
	if err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(nonNilSlice(devs))
	}
	t := newTable(c.stdout, "NAME", "DRIVER", "STATE", "TAGS", "REQUESTS", "ERRORS", "P50", "P99", "LAST GOOD", "URL", "REASON")
	for _, d := range devs {
		req, errs, p50, p99, last := "-", "-", "-", "-", "-"
		if st := d.Stats; st != nil {
			req, errs = fmt.Sprint(st.Requests), fmt.Sprint(st.ErrorsTotal)
			p50, p99, last = fmtMillis(st.LatencyP50), fmtMillis(st.LatencyP99), fmtSince(st.LastGood)
		}
		t.row(d.Name, d.Driver, d.State, fmt.Sprint(d.Tags), req, errs, p50, p99, last, orDash(d.URL), d.Reason)
	}
	return t.flush()
}

// fmtMillis is a latency in milliseconds: "1.5ms", "-" for none.
func fmtMillis(ms float64) string {
	if ms <= 0 {
		return "-"
	}
	return strconv.FormatFloat(ms, 'g', 3, 64) + "ms"
}

// fmtSince is how long ago t was, to the second: "3s ago"; "never".
func fmtSince(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return time.Since(*t).Round(time.Second).String() + " ago"
}

// showStats prints a device's statistics, one row per figure.
func showStats(t *table, st *apitypes.DeviceStats) {
	t.row("requests", fmt.Sprint(st.Requests))
	kinds := make([]string, 0, len(st.Errors))
	for k := range st.Errors {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		if st.Errors[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, st.Errors[k]))
		}
	}
	errs := fmt.Sprint(st.ErrorsTotal)
	if len(parts) > 0 {
		errs += " (" + strings.Join(parts, ", ") + ")"
	}
	t.row("errors", errs)
	t.row("timeouts", fmt.Sprint(st.Timeouts))
	t.row("reconnects", fmt.Sprint(st.Reconnects))
	t.row("last good poll", fmtStamp(st.LastGood))
	t.row("last error", fmtStamp(st.LastError))
	t.row("latency", fmt.Sprintf("p50 %s, p99 %s", fmtMillis(st.LatencyP50), fmtMillis(st.LatencyP99)))
	for _, u := range st.Units {
		v := fmt.Sprintf("%s, %d consecutive timeouts", u.Breaker, u.Timeouts)
		if u.DemotedUntil != nil {
			v += ", demoted until " + u.DemotedUntil.Format(time.RFC3339)
		}
		t.row(fmt.Sprintf("unit %d breaker", u.UnitID), v)
	}
	if o := st.OPCUA; o != nil {
		t.row("monitored items", fmt.Sprintf("%d (%d bad) in %d subscriptions", o.MonitoredItems, o.BadItems, o.Subscriptions))
		t.row("publish", fmt.Sprintf("%d responses with data, %d keep-alives, %.2f/s this session", o.PublishResponses, o.KeepAlives, o.PublishRate))
		t.row("data changes", fmt.Sprint(o.DataChanges))
		t.row("sessions", fmt.Sprintf("%d created, %d re-activated", o.SessionsCreated, o.SessionsReactivated))
	}
}

// fmtStamp is an RFC 3339 time with how long ago it was; "never".
func fmtStamp(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Format(time.RFC3339Nano) + " (" + fmtSince(t) + ")"
}

// deviceFields are the fields of GET /api/v1/devices this qubiqctl shows by
// name; show prints any other field after them.
var deviceFields = []string{"name", "driver", "url", "state", "reason", "tags", "stats"}

func cmdDevicesShow(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "DEVICE"); err != nil {
		return err
	}
	var dev map[string]json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/api/v1/devices/"+url.PathEscape(args[0]), nil, &dev); err != nil {
		var pe *client.ProblemError
		if !errors.As(err, &pe) || pe.Status != http.StatusNotFound {
			return err
		}
		var names []string
		if devs, lerr := c.c.ListDevices(ctx); lerr == nil {
			for _, d := range devs {
				names = append(names, d.Name)
			}
		}
		return fmt.Errorf("no device %q (the project has: %s)", args[0], orDash(strings.Join(names, ", ")))
	}
	var info apitypes.DeviceInfo
	b, _ := json.Marshal(dev)
	if err := json.Unmarshal(b, &info); err != nil {
		return fmt.Errorf("GET /api/v1/devices: device %q: %w", args[0], err)
	}
	var plan []apitypes.PlannedRequest
	if info.Driver == "modbus" {
		var err error
		if plan, err = c.c.DevicePlan(ctx, info.Name); err != nil {
			return err
		}
	}
	if c.g.json {
		out := map[string]any{}
		for k, v := range dev {
			out[k] = v
		}
		if info.Driver == "modbus" {
			out["plan"] = nonNilSlice(plan)
		}
		return c.printJSON(out)
	}
	t := newTable(c.stdout)
	t.row("name", info.Name)
	t.row("driver", info.Driver)
	t.row("url", orDash(info.URL))
	t.row("state", info.State)
	if info.Reason != "" {
		t.row("reason", info.Reason)
	}
	t.row("tags", fmt.Sprint(info.Tags))
	if info.Driver == "modbus" {
		t.row("scan requests", planSummary(info.Name, plan))
	}
	if info.Stats != nil {
		showStats(t, info.Stats)
	}
	var extra []string
	for k := range dev {
		if !slices.Contains(deviceFields, k) {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		showField(t, k, dev[k])
	}
	return t.flush()
}

// showField prints a field a newer daemon may send: an object one row per
// key (name.key), anything else as compact JSON.
func showField(t *table, name string, raw json.RawMessage) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil && len(obj) > 0 {
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.row(name+"."+k, string(compactJSON(obj[k])))
		}
		return
	}
	t.row(name, string(compactJSON(raw)))
}

// planSummary is "3 per round of scans (1s: 2, 5s: 1); ...", or "none".
func planSummary(device string, plan []apitypes.PlannedRequest) string {
	if len(plan) == 0 {
		return "none (no tags to poll)"
	}
	per := map[string]int{}
	var scans []string
	for _, p := range plan {
		if per[p.Scan] == 0 {
			scans = append(scans, p.Scan)
		}
		per[p.Scan]++
	}
	parts := make([]string, len(scans))
	for i, s := range scans {
		parts[i] = fmt.Sprintf("%s: %d", s, per[s])
	}
	return fmt.Sprintf("%d per round of scans (%s); qubiqctl devices plan %s lists them", len(plan), strings.Join(parts, ", "), device)
}

func cmdDevicesPlan(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "DEVICE"); err != nil {
		return err
	}
	plan, err := c.c.DevicePlan(ctx, args[0])
	if err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(nonNilSlice(plan))
	}
	if len(plan) == 0 {
		// An empty plan: a device of another driver (which has none), or
		// a Modbus device without tags.
		driver := ""
		if devs, err := c.c.ListDevices(ctx); err == nil {
			for _, d := range devs {
				if d.Name == args[0] {
					driver = d.Driver
				}
			}
		}
		switch driver {
		case "modbus", "":
			fmt.Fprintf(c.stdout, "device %s has no tags to poll: its scan sends no request\n", args[0])
			return nil
		case "opcua":
			return fmt.Errorf("device %s uses driver opcua: it has no request plan, its tags are monitored items (one subscription per scan class; qubiqctl devices show %s)", args[0], args[0])
		}
		return fmt.Errorf("device %s uses driver %s: a request plan exists for Modbus devices only", args[0], driver)
	}
	t := newTable(c.stdout, "SCAN", "FC", "UNIT", "START", "COUNT", "TAGS")
	for _, p := range plan {
		t.row(p.Scan, fmt.Sprintf("%02d", p.FunctionCode), fmt.Sprint(p.UnitID), fmt.Sprint(p.Start), fmt.Sprint(p.Count), strings.Join(p.Tags, ","))
	}
	return t.flush()
}

// completeDevices completes device names (of one driver, or all for "")
// for the first positional argument.
func completeDevices(driver string) func(ctx context.Context, c *cli, pos []string, word string) []string {
	return func(ctx context.Context, c *cli, pos []string, word string) []string {
		if len(pos) > 0 {
			return nil
		}
		devs, err := c.c.ListDevices(ctx)
		if err != nil {
			return nil
		}
		var out []string
		for _, d := range devs {
			if (driver == "" || d.Driver == driver) && strings.HasPrefix(d.Name, word) {
				out = append(out, d.Name)
			}
		}
		sort.Strings(out)
		return out
	}
}
