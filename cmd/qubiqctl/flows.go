package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"qubiq.dev/edge/api/apitypes"
)

// The flows commands (docs/flows.md, "REST and qubiqctl"): list, show,
// reset, push, versions, rollback, delete. They call the /api/v1/flows
// routes through do.
func init() {
	commands["flows list"] = command{name: "flows list",
		help: "List the flows: state (running, failed, stopped), version, trigger, queue, and the counters in, processed, out, filtered, errors, dropped, timeouts; with the last error of a flow that has one.",
		run:  cmdFlowsList}
	commands["flows show"] = command{name: "flows show", args: "NAME",
		help: "Show one flow: its state and why, its counters, its last error, and each node's state and counters.",
		run:  cmdFlowsShow, complete: completeFlows}
	commands["flows reset"] = command{name: "flows reset", args: "NAME",
		help: "Reset a flow: its failed nodes (on_error: fail) run again; a stopped flow starts again from its latest version.",
		run:  cmdFlowsReset, complete: completeFlows}
	commands["flows push"] = command{name: "flows push", args: "NAME FILE",
		help: "Save FILE (- for stdin: one flow, YAML or JSON) as the next version of flow NAME; it replaces the running version and takes over its queued messages.",
		run:  cmdFlowsPush}
	commands["flows versions"] = command{name: "flows versions", args: "NAME",
		help: "List the stored versions of a flow: number, when and by whom it was saved.",
		run:  cmdFlowsVersions, complete: completeFlows}
	commands["flows rollback"] = command{name: "flows rollback", args: "NAME",
		help: "Withdraw the latest version of a flow; the version before it runs again.",
		run:  cmdFlowsRollback, complete: completeFlows}
	commands["flows delete"] = command{name: "flows delete", args: "NAME",
		help: "Stop a flow and delete its versions; its queued messages are dropped (the answer counts them).",
		run:  cmdFlowsDelete, complete: completeFlows}
}

func flowPath(name string, rest ...string) string {
	p := "/api/v1/flows/" + url.PathEscape(name)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

func completeFlows(ctx context.Context, c *cli, pos []string, word string) []string {
	if len(pos) > 0 {
		return nil
	}
	var flows []apitypes.FlowInfo
	if err := c.do(ctx, http.MethodGet, "/api/v1/flows", nil, &flows); err != nil {
		return nil
	}
	var out []string
	for _, f := range flows {
		if strings.HasPrefix(f.Name, word) {
			out = append(out, f.Name)
		}
	}
	return out
}

func cmdFlowsList(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	var flows []apitypes.FlowInfo
	if err := c.do(ctx, http.MethodGet, "/api/v1/flows", nil, &flows); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(nonNilSlice(flows))
	}
	t := newTable(c.stdout, "NAME", "STATE", "VERSION", "TRIGGER", "QUEUE", "IN", "PROCESSED", "OUT", "FILTERED", "ERRORS", "DROPPED", "TIMEOUTS", "LAST ERROR", "REASON")
	for _, f := range flows {
		n := f.Counters
		t.row(f.Name, f.State, fmt.Sprint(f.Version), f.Trigger, fmt.Sprintf("%d/%d", f.Queue, f.QueueSize),
			fmt.Sprint(n.In), fmt.Sprint(n.Processed), fmt.Sprint(n.Out), fmt.Sprint(n.Filtered), fmt.Sprint(n.Errors),
			fmt.Sprint(n.Dropped), fmt.Sprint(n.Timeouts), lastError(f.LastError), orDash(f.Reason)) // why it is stopped or failed
	}
	return t.flush()
}

// lastError is a flow error in one cell: its time, node, kind and message.
func lastError(e *apitypes.FlowError) string {
	if e == nil {
		return "-"
	}
	s := fmt.Sprintf("%s %s: %s: %s", e.Time.UTC().Format(tableTime), e.Node, e.Kind, e.Message)
	if e.Line > 0 {
		s += fmt.Sprintf(" (line %d)", e.Line)
	}
	return s
}

func printFlow(w io.Writer, f apitypes.FlowInfo) error {
	t := newTable(w)
	t.row("name", f.Name)
	if f.Description != "" {
		t.row("description", f.Description)
	}
	t.row("state", f.State)
	if f.Reason != "" {
		t.row("reason", f.Reason)
	}
	t.row("version", fmt.Sprint(f.Version))
	t.row("trigger", f.Trigger)
	t.row("queue", fmt.Sprintf("%d of %d", f.Queue, f.QueueSize))
	n := f.Counters
	t.row("counters", fmt.Sprintf("in %d, processed %d, out %d, filtered %d, errors %d, dropped %d, timeouts %d",
		n.In, n.Processed, n.Out, n.Filtered, n.Errors, n.Dropped, n.Timeouts))
	t.row("last error", lastError(f.LastError))
	if err := t.flush(); err != nil {
		return err
	}
	if len(f.Nodes) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	nt := newTable(w, "NODE", "TYPE", "STATE", "RUNS", "ERRORS", "TIMEOUTS", "LAST ERROR")
	for _, nd := range f.Nodes {
		nt.row(nd.ID, nd.Type, nd.State, fmt.Sprint(nd.Runs), fmt.Sprint(nd.Errors), fmt.Sprint(nd.Timeouts), lastError(nd.LastError))
	}
	return nt.flush()
}

func cmdFlowsShow(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "NAME"); err != nil {
		return err
	}
	var f apitypes.FlowInfo
	if err := c.do(ctx, http.MethodGet, flowPath(args[0]), nil, &f); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(f)
	}
	return printFlow(c.stdout, f)
}

func cmdFlowsReset(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "NAME"); err != nil {
		return err
	}
	var f apitypes.FlowInfo
	if err := c.do(ctx, http.MethodPost, flowPath(args[0], "reset"), struct{}{}, &f); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(f)
	}
	fmt.Fprintf(c.stdout, "flow %s reset: %s (version %d)\n", f.Name, f.State, f.Version)
	return nil
}

func printSaved(c *cli, what string, s apitypes.FlowSaved) error {
	if c.g.json {
		return c.printJSON(s)
	}
	fmt.Fprintf(c.stdout, "flow %s %s: version %d running", s.Name, what, s.Version)
	if s.Carried > 0 || s.Dropped > 0 {
		fmt.Fprintf(c.stdout, "; %d queued messages taken over, %d dropped", s.Carried, s.Dropped)
	}
	fmt.Fprintln(c.stdout)
	return nil
}

func cmdFlowsPush(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 2, 2, "NAME FILE"); err != nil {
		return err
	}
	doc, err := readInput(args[1])
	if err != nil {
		return err
	}
	def, err := json.Marshal(string(doc))
	if err != nil {
		return err
	}
	var s apitypes.FlowSaved
	if err := c.do(ctx, http.MethodPut, flowPath(args[0]), apitypes.FlowSaveRequest{Definition: def}, &s); err != nil {
		return err
	}
	return printSaved(c, "saved", s)
}

func cmdFlowsVersions(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "NAME"); err != nil {
		return err
	}
	var vs []apitypes.FlowVersion
	if err := c.do(ctx, http.MethodGet, flowPath(args[0], "versions"), nil, &vs); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(nonNilSlice(vs))
	}
	t := newTable(c.stdout, "VERSION", "SAVED", "BY")
	for _, v := range vs {
		t.row(fmt.Sprint(v.Version), v.Saved.UTC().Format(time.RFC3339), orDash(v.Principal))
	}
	return t.flush()
}

func cmdFlowsRollback(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "NAME"); err != nil {
		return err
	}
	var s apitypes.FlowSaved
	if err := c.do(ctx, http.MethodPost, flowPath(args[0], "rollback"), struct{}{}, &s); err != nil {
		return err
	}
	return printSaved(c, "rolled back", s)
}

func cmdFlowsDelete(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "NAME"); err != nil {
		return err
	}
	var s apitypes.FlowSaved
	if err := c.do(ctx, http.MethodDelete, flowPath(args[0]), nil, &s); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(s)
	}
	fmt.Fprintf(c.stdout, "flow %s deleted; %d queued messages dropped\n", s.Name, s.Dropped)
	return nil
}
