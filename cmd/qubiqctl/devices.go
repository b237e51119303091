package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"qubiq.dev/edge/api/apitypes"
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
	t := newTable(c.stdout, "NAME", "DRIVER", "STATE", "TAGS", "URL", "REASON")
	for _, d := range devs {
		t.row(d.Name, d.Driver, d.State, fmt.Sprint(d.Tags), orDash(d.URL), d.Reason)
	}
	return t.flush()
}

// deviceFields are the fields of GET /api/v1/devices this qubiqctl shows by
// name; show prints any other field after them.
var deviceFields = []string{"name", "driver", "url", "state", "reason", "tags"}

func cmdDevicesShow(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "DEVICE"); err != nil {
		return err
	}
	var raw []map[string]json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/api/v1/devices", nil, &raw); err != nil {
		return err
	}
	var dev map[string]json.RawMessage
	var names []string
	for _, d := range raw {
		var n string
		_ = json.Unmarshal(d["name"], &n)
		names = append(names, n)
		if n == args[0] {
			dev = d
		}
	}
	if dev == nil {
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
		t.row("requests", planSummary(info.Name, plan))
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
