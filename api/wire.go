package api

import (
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// The translation of the service layer's answers (package gateway) into
// the REST wire (package apitypes): names for typed values, milliseconds
// for durations, lists never null.

func wireTagInfo(ti gateway.TagInfo) apitypes.TagInfo {
	out := apitypes.TagInfo{Path: ti.Path, Device: ti.Device, Address: ti.Address, Type: ti.Type.String(),
		Units: ti.Units, WriteLevel: ti.WriteLevel.String(), ReadOnly: ti.ReadOnly, Min: ti.Min, Max: ti.Max}
	if ti.Scan > 0 {
		out.Scan = ti.Scan.String() // empty for tags not polled
	}
	return out
}

func wireTagValues(vs []gateway.TagValue) []apitypes.TagValue {
	out := make([]apitypes.TagValue, len(vs))
	for i, v := range vs {
		out[i] = apitypes.FromVQT(v.Path, v.VQT)
	}
	return out
}

func wireEntries(es []gateway.ScriptEntry) []apitypes.ScriptEntry {
	out := make([]apitypes.ScriptEntry, len(es))
	for i, e := range es {
		out[i] = apitypes.ScriptEntry{Name: e.Name, TimeoutMS: e.Timeout.Milliseconds()}
	}
	return out
}

func wireDiagnostics(ds []gateway.Diagnostic) []apitypes.Diagnostic {
	out := make([]apitypes.Diagnostic, len(ds))
	for i, d := range ds {
		out[i] = apitypes.Diagnostic{Line: d.Line, Column: d.Column, EndLine: d.EndLine, EndColumn: d.EndColumn,
			Code: d.Code, Message: d.Message, Severity: d.Severity}
	}
	return out
}

func wireSaved(s gateway.ScriptSaved) apitypes.ScriptSaved {
	return apitypes.ScriptSaved{Module: s.Module, Version: s.Version, Entries: wireEntries(s.Entries),
		Diagnostics: wireDiagnostics(s.Diagnostics)}
}

func wireRun(r gateway.ScriptRun) apitypes.ScriptRun {
	out := apitypes.ScriptRun{Result: r.Result, DurationMS: r.Duration.Milliseconds(), Logs: make([]apitypes.LogLine, len(r.Logs))}
	for i, l := range r.Logs {
		out.Logs[i] = apitypes.LogLine{Level: l.Level, Msg: l.Msg}
	}
	return out
}

func wireHealth(h gateway.HealthReport) apitypes.Health {
	out := apitypes.Health{Status: h.Status, Reasons: h.Reasons, Version: h.Version, UptimeS: int64(h.Uptime.Seconds()),
		Sandbox: apitypes.SandboxHealth{Mode: h.Sandbox.Mode, Limits: h.Sandbox.Limits, Hardening: h.Sandbox.Hardening,
			Python: apitypes.PythonHealth{Status: h.Sandbox.Python.Status, Version: h.Sandbox.Python.Version, Path: h.Sandbox.Python.Path},
			Linter: h.Sandbox.Linter},
		Devices: make(map[string]apitypes.DeviceHealth, len(h.Devices)), Warnings: h.Warnings}
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	for n, d := range h.Devices {
		out.Devices[n] = apitypes.DeviceHealth{State: d.State, Reason: d.Reason}
	}
	if len(h.Flows) > 0 {
		out.Flows = make(map[string]apitypes.FlowHealth, len(h.Flows))
		for n, f := range h.Flows {
			out.Flows[n] = apitypes.FlowHealth{State: f.State, Reason: f.Reason}
		}
	}
	if m := h.MQTT; m != nil {
		out.MQTT = &apitypes.MQTTHealth{Connected: m.Connected, Broker: m.Broker, LastError: m.LastError,
			OutboxDepth: m.OutboxDepth, OutboxBytes: m.OutboxBytes, OutboxDropped: m.OutboxDropped,
			RequireSigned: m.RequireSigned, Accepted: m.Accepted, Refused: m.Refused}
		if !m.Since.IsZero() && m.Connected {
			t := m.Since
			out.MQTT.Since = &t
		}
		if !m.LastErrorAt.IsZero() {
			t := m.LastErrorAt
			out.MQTT.LastErrorAt = &t
		}
		if !m.OutboxOldest.IsZero() {
			out.MQTT.OutboxOldestAgeS = time.Since(m.OutboxOldest).Seconds()
		}
	}
	return out
}

func names[T ~string](xs []T) []string {
	if xs == nil {
		return nil
	}
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}

func wireKey(k gateway.APIKey) apitypes.APIKeyInfo {
	info := apitypes.APIKeyInfo{ID: k.ID, Name: k.Name, Scopes: names(k.Scopes), WriteLevel: k.WriteLevel.String(),
		Permissions: names(k.Permissions), Prefixes: k.Prefixes, Created: k.Created}
	if !k.Expires.IsZero() {
		e := k.Expires
		info.Expires = &e
	}
	return info
}

func wireUser(u gateway.User) apitypes.UserInfo {
	out := apitypes.UserInfo{Name: u.Name, Realm: string(u.Realm), Disabled: u.Disabled, Created: u.Created, Changed: u.Changed,
		Permissions: []string{}}
	if u.Level != auth.LevelNone {
		out.Level = u.Level.String()
	}
	for _, p := range u.Permissions {
		out.Permissions = append(out.Permissions, string(p))
	}
	return out
}

func wireAudit(r gateway.AuditRecord) apitypes.AuditRecord {
	return apitypes.AuditRecord{Seq: r.Seq, Time: r.Time, Principal: r.Principal, Realm: r.Realm, Origin: r.Origin,
		Script: r.Script, Action: r.Action, Target: r.Target, Before: r.Before, After: r.After, Result: r.Result, Detail: r.Detail}
}

func wirePanelEvent(r gateway.AuditRecord) apitypes.PanelEvent {
	return apitypes.PanelEvent{Seq: r.Seq, Time: r.Time, Principal: r.Principal, Realm: r.Realm, Action: r.Action,
		Target: r.Target, Result: r.Result, Detail: r.Detail, After: r.After}
}

func wireSeries(hs gateway.HistorySeries) apitypes.HistorySeries {
	out := apitypes.HistorySeries{Path: hs.Path, Aggregate: hs.Aggregate, Bad: hs.Bad, Known: hs.Known,
		Points: make([]apitypes.HistoryPoint, len(hs.Points))}
	if hs.Interval > 0 {
		ms := hs.Interval.Milliseconds()
		out.IntervalMS = &ms
	}
	for i, p := range hs.Points {
		out.Points[i] = apitypes.HistoryPoint{Timestamp: p.Time, Value: p.Value, Quality: p.Quality.String(), StatusCode: p.StatusCode}
	}
	return out
}

func wireChanges(c gateway.ProjectChanges) apitypes.ProjectChanges {
	set := func(s gateway.ChangeSet) apitypes.ChangeSet {
		return apitypes.ChangeSet{Added: s.Added, Changed: s.Changed, Removed: s.Removed}
	}
	return apitypes.ProjectChanges{Devices: set(c.Devices), Tags: set(c.Tags), RestartRequired: c.RestartRequired}
}

func wireCert(c gateway.DeviceCert) apitypes.DeviceCert {
	return apitypes.DeviceCert{Device: c.Device, Thumbprint: c.Thumbprint, Status: c.Status, Subject: c.Subject,
		Issuer: c.Issuer, ApplicationURI: c.ApplicationURI, DNSNames: c.DNSNames, NotBefore: c.NotBefore,
		NotAfter: c.NotAfter, Expired: c.Expired, IsCA: c.IsCA}
}

func wirePackage(p gateway.Package) apitypes.SandboxPackage {
	w := apitypes.SandboxPackage{Name: p.Name, Version: p.Version, Imports: p.Imports, Requested: p.Requested,
		Requirement: p.Requirement, Source: p.Source, InstalledBy: p.InstalledBy, Native: p.Native, Widens: p.Widens}
	if !p.InstalledAt.IsZero() {
		t := p.InstalledAt
		w.InstalledAt = &t
	}
	return w
}

func wirePackages(ps []gateway.Package) []apitypes.SandboxPackage {
	out := make([]apitypes.SandboxPackage, 0, len(ps))
	for _, p := range ps {
		out = append(out, wirePackage(p))
	}
	return out
}

func wireWidenings(ws []gateway.PackageWidening) []apitypes.PackageWidening {
	out := make([]apitypes.PackageWidening, 0, len(ws))
	for _, w := range ws {
		out = append(out, apitypes.PackageWidening{Package: w.Package, Version: w.Version, Requested: w.Requested,
			Imports: w.Imports, Widens: w.Widens})
	}
	return out
}

func wireChange(ch gateway.PackageChange) apitypes.PackageChange {
	return apitypes.PackageChange{Action: ch.Action, Packages: ch.Packages, Installed: wirePackages(ch.Installed),
		Allowed: ch.Allowed, Widenings: wireWidenings(ch.Widenings), DurationMS: ch.Duration.Milliseconds()}
}

func wireIndexCheck(c gateway.IndexCheck) apitypes.IndexCheck {
	return apitypes.IndexCheck{IndexURL: c.IndexURL, URL: c.URL, Reachable: c.Reachable, Status: c.Status,
		DurationMS: c.DurationMS, Reason: c.Reason}
}

func wireDevice(d gateway.DeviceInfo) apitypes.DeviceInfo {
	out := apitypes.DeviceInfo{Name: d.Name, Driver: d.Driver, URL: d.URL, State: d.State, Reason: d.Reason, Tags: d.Tags}
	st := d.Stats
	if st == nil {
		return out
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	ws := &apitypes.DeviceStats{Requests: st.Requests, Errors: st.Errors, ErrorsTotal: st.ErrorsTotal,
		Timeouts: st.Timeouts, Reconnects: st.Reconnects, LastGood: optTime(st.LastGood), LastError: optTime(st.LastError),
		LatencyP50: ms(st.P50), LatencyP99: ms(st.P99)}
	if ws.Errors == nil {
		ws.Errors = map[string]uint64{}
	}
	for _, u := range st.Units {
		ws.Units = append(ws.Units, apitypes.UnitBreaker{UnitID: u.Unit, Breaker: u.Breaker, Timeouts: u.Timeouts,
			DemotedUntil: optTime(u.DemotedUntil)})
	}
	if o := st.OPCUA; o != nil {
		ws.OPCUA = &apitypes.OPCUAFigures{MonitoredItems: o.MonitoredItems, BadItems: o.BadItems,
			Subscriptions: o.Subscriptions, PublishResponses: o.PublishResponses, KeepAlives: o.KeepAlives,
			DataChanges: o.DataChanges, PublishRate: o.PublishRate, SessionsCreated: o.SessionsCreated,
			SessionsReactivated: o.SessionsReactivate}
	}
	out.Stats = ws
	return out
}
