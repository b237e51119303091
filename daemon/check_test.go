package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "qubiq.dev/edge/device/modbus"
	_ "qubiq.dev/edge/device/sim"

	"qubiq.dev/edge/config"
)

func TestParseViews_ErrorNamesFileViewAndLine(t *testing.T) {
	p, err := config.ParseProject([]byte(`devices: [{name: sim, driver: sim}]
tags:
  - {path: A/B, device: sim, address: memory, type: float64, units: bar}
scripts:
  - {module: pumps, file: pumps.py, liveview: [start]}
views:
  - name: p1
    widgets:
      - {type: value, tag: A/B}
      - {type: button, entry: pumps.stop}
`))
	if err != nil {
		t.Fatal(err)
	}
	p.File = "/srv/project.yaml"
	_, err = parseViews(p)
	if err == nil || !strings.Contains(err.Error(), "/srv/project.yaml: views:") || !strings.Contains(err.Error(), `line 10: view "p1" widgets[1]`) ||
		!strings.Contains(err.Error(), `"pumps.stop": not in the liveview list`) {
		t.Fatalf("err = %v", err)
	}
}

// TestCheck_EveryPartsProblemsInOneRun: --check-config reports, in one
// run, the problems of every part's sections, each with the file and
// line: a device, a tag, a named query, a message handler, a seed user, a
// view, a flow (one with no trigger, one writing a tag its grant may not,
// one publishing on the supervisor link, which is off), an alarm, and the
// config's alarm settings.
func TestCheck_EveryPartsProblemsInOneRun(t *testing.T) {
	dir := t.TempDir()
	project := `devices:
  - {name: sim, driver: sim}
  - {name: x, driver: nosuch}
tags:
  - {path: A/B, device: simm, address: memory}
named_queries:
  - {name: q, database: local, sql: "SELECT 1 WHERE 1 = :a"}
message_handlers:
  - {name: h, entry: nodot}
users:
  - {name: op, realm: operator, level: boss}
views:
  - name: v
    widgets:
      - {type: value, tag: Nope/Tag}
flows:
  - {name: f1}
  - name: f2
    trigger: {tag: A/B}
    nodes:
      - {id: w, type: tag_write, path: A/B}
  - name: f3
    trigger: {every: 1s}
    nodes: [{id: p, type: mqtt_publish, topic: alerts}]
alarms:
  - {name: High, tag: A/B, mode: above, setpoint: 1, active_delay: -1s}
`
	if err := os.WriteFile(filepath.Join(dir, "project.yaml"), []byte(project), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "data_dir: data\nproject: project.yaml\nalarms: {max_shelve: forever}\n"
	if err := os.WriteFile(filepath.Join(dir, "qubiq.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Check(filepath.Join(dir, "qubiq.yaml"), quiet)
	if err == nil {
		t.Fatal("a bad project passed the check")
	}
	for _, want := range []string{`project.yaml:17: flow "f1": needs a trigger`,
		`project.yaml:21: flow "f2": node "w": writes tag "A/B", but the flow's grant has no tag:write`,
		`project.yaml:24: flow "f3": node "p": mqtt_publish needs the supervisor link, which is off (mqtt.brokers is empty)`,
		`project.yaml:3: device "x": unknown driver "nosuch"`,
		`project.yaml:5: tag "A/B": unknown device "simm"`, `named query`, `message handler "h"`, `users[0]`, `views:`,
		`project.yaml:26: alarm "High": active_delay: -1s is below zero`, `qubiq.yaml: line 3: alarms.max_shelve: "forever"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("check error lacks %q:\n%v", want, err)
		}
	}
}

// TestCheck_DeviceNamedOnce: a driver's own error, which names its device,
// is reported with the device named once, and the url mistake says what to
// write.
func TestCheck_DeviceNamedOnce(t *testing.T) {
	dir := t.TempDir()
	project := "devices:\n  - {name: plc1, driver: modbus, url: \"192.168.1.21:502\"}\n"
	if err := os.WriteFile(filepath.Join(dir, "project.yaml"), []byte(project), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "qubiq.yaml"), []byte("data_dir: data\nproject: project.yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Check(filepath.Join(dir, "qubiq.yaml"), quiet)
	if err == nil || strings.Count(err.Error(), `device "plc1"`) != 1 || !strings.Contains(err.Error(), "write tcp://192.168.1.21:502") {
		t.Fatalf("check = %v, want device \"plc1\" named once and the url to write", err)
	}
}

// TestCheck_MQTTNeedsApplianceID: with the supervisor link on and no
// appliance_id, --check-config fails as the start would (the link's client
// id and topic root are the appliance id, docs/mqtt.md).
func TestCheck_MQTTNeedsApplianceID(t *testing.T) {
	dir := t.TempDir()
	cfg := "data_dir: data\nmqtt:\n  brokers: [tcp://127.0.0.1:1]\n"
	if err := os.WriteFile(filepath.Join(dir, "qubiq.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Check(filepath.Join(dir, "qubiq.yaml"), quiet)
	if err == nil || !strings.Contains(err.Error(), "qubiq.yaml: mqtt: appliance_id is empty") {
		t.Fatalf("check = %v, want the empty appliance_id refused", err)
	}
	cfg = "appliance_id: line1-edge-01\n" + cfg
	if err := os.WriteFile(filepath.Join(dir, "qubiq.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Check(filepath.Join(dir, "qubiq.yaml"), quiet); err != nil {
		t.Fatalf("check with appliance_id = %v", err)
	}
}

// TestCheck_BrokenConfigStillChecksTheProject: a config with problems of
// its own does not stop --check-config before the project: both files'
// problems come in one run, each FILE:LINE: what (config.Problems).
func TestCheck_BrokenConfigStillChecksTheProject(t *testing.T) {
	dir := t.TempDir()
	project := "devices: [{name: sim, driver: sim}]\ntags:\n  - {path: A/B, device: sim, address: memory, type: float65, write_level: superviser}\n"
	if err := os.WriteFile(filepath.Join(dir, "project.yaml"), []byte(project), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "qubiq.yaml"), []byte("data_dir: data\nproject: project.yaml\npython: {replicas: -1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := config.Problems(Check(filepath.Join(dir, "qubiq.yaml"), quiet))
	for _, want := range []string{filepath.Join(dir, "qubiq.yaml") + ":3: python.replicas -1",
		filepath.Join(dir, "project.yaml") + `:3: tag "A/B": unknown type "float65"`,
		filepath.Join(dir, "project.yaml") + `:3: tag "A/B": unknown write level "superviser"`} {
		found := false
		for _, l := range got {
			found = found || strings.HasPrefix(l, want)
		}
		if !found {
			t.Errorf("check lacks %q:\n%s", want, strings.Join(got, "\n"))
		}
	}
}
