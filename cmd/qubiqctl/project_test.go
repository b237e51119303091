package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// projectDaemon fakes the project routes: it records each request (method,
// path with query, content type, body) and answers imports with changes,
// or with a refusal when the body holds "bad".
type projectDaemon struct {
	mu   sync.Mutex
	reqs []string
	body string
	srv  *httptest.Server
}

const changesBody = `{"devices":{"added":[],"changed":[],"removed":[]},"tags":{"added":["L/A","L/B"],"changed":["L/Set"],"removed":[]},"restart_required":["views"]}`

const refusedBody = `{"type":"urn:qubiq:problem:invalid","title":"Bad Request","status":400,"kind":"invalid",
"detail":"line 3: tag \"L/C\": unknown device \"simm\"\n/etc/qubiq/project.yaml:9: tag \"L/D\": bad",
"errors":[{"line":3,"message":"line 3: tag \"L/C\": unknown device \"simm\""},{"line":9,"message":"/etc/qubiq/project.yaml:9: tag \"L/D\": bad"}]}`

func newProjectDaemon(t *testing.T) *projectDaemon {
	t.Helper()
	d := &projectDaemon{}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.reqs = append(d.reqs, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Content-Type"))
		if r.Method == "POST" {
			d.body = string(b)
		}
		d.mu.Unlock()
		switch {
		case r.Method == "POST" && strings.Contains(string(b), "bad"):
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(400)
			io.WriteString(w, refusedBody)
		case r.Method == "POST":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, changesBody)
		case r.URL.Path == "/api/v1/project/export":
			w.Header().Set("Content-Type", "application/yaml")
			io.WriteString(w, "devices: []\n")
		case r.URL.Path == "/api/v1/tags/export":
			w.Header().Set("Content-Type", "text/csv")
			io.WriteString(w, "export:"+r.URL.Query().Get("format"))
		case r.URL.Path == "/api/v1/devices/ua/browse":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, browseAnswers[r.URL.Query().Get("node")])
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(404)
			io.WriteString(w, `{"type":"urn:qubiq:problem:not_found","title":"Not Found","status":404,"detail":"no route","kind":"not_found"}`)
		}
	}))
	t.Cleanup(d.srv.Close)
	return d
}

// browseAnswers is an address space: Objects → Plc (object) and Status
// (variable); Plc → Speed, "Temp (°C)", a second "Speed" node, a
// reference back to Plc, and Axis → Pos.
var browseAnswers = map[string]string{
	"i=85": `[{"node_id":"nsu=urn:p;s=Plc","browse_name":"Plc","node_class":"Object","writable":false},
	          {"node_id":"nsu=urn:p;s=Status","browse_name":"Status","node_class":"Variable","data_type":"String","writable":false}]`,
	"nsu=urn:p;s=Plc": `[{"node_id":"nsu=urn:p;s=Speed","browse_name":"Speed","node_class":"Variable","data_type":"Double","writable":true},
	          {"node_id":"nsu=urn:p;s=Temp","browse_name":"Temp (°C)","node_class":"Variable","data_type":"Float","writable":false},
	          {"node_id":"nsu=urn:p;s=Speed2","browse_name":"Speed","node_class":"Variable","data_type":"Double","writable":true},
	          {"node_id":"nsu=urn:p;s=Plc","browse_name":"Plc","node_class":"Object"},
	          {"node_id":"nsu=urn:p;s=Run","browse_name":"Run","node_class":"Method"},
	          {"node_id":"nsu=urn:p;s=Axis","browse_name":"Axis","node_class":"Object"}]`,
	"nsu=urn:p;s=Axis": `[{"node_id":"nsu=urn:p;s=Pos","browse_name":"Pos","node_class":"Variable","writable":true}]`,
}

func (d *projectDaemon) requests() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string{}, d.reqs...)
}

func TestRun_TagsImport_FormatFromExtension(t *testing.T) {
	clearEnv(t)
	d := newProjectDaemon(t)
	dir := t.TempDir()
	tests := []struct {
		file, flag, want string
	}{
		{"tags.csv", "", "POST /api/v1/tags/import?format=csv text/csv; charset=utf-8"},
		{"tags.YAML", "", "POST /api/v1/tags/import?format=yaml application/yaml"},
		{"tags.json", "", "POST /api/v1/tags/import?format=yaml application/yaml"},
		{"tags.txt", "--format=csv", "POST /api/v1/tags/import?format=csv text/csv; charset=utf-8"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f := filepath.Join(dir, tt.file)
			os.WriteFile(f, []byte("path,device,address\nL/A,sim,memory\n"), 0o644)
			args := []string{"--url", d.srv.URL, "tags", "import", f}
			if tt.flag != "" {
				args = append(args, tt.flag)
			}
			code, out, errOut := runCLI(args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if r := d.requests(); r[len(r)-1] != tt.want {
				t.Fatalf("request %q, want %q", r[len(r)-1], tt.want)
			}
			want := "         ADDED     CHANGED  REMOVED\ndevices  -         -        -\ntags     L/A, L/B  L/Set    -\n\nrestart qubiqd to apply: views\n"
			if out != want {
				t.Fatalf("output:\n%q\nwant\n%q", out, want)
			}
		})
	}
	if code, _, errOut := runCLI("--url", d.srv.URL, "tags", "import", filepath.Join(dir, "tags.txt")); code != 2 || !strings.Contains(errOut, "give --format csv|yaml") {
		t.Fatalf("unknown extension: exit %d %s", code, errOut)
	}
}

// TestRun_TagsImport_RefusedNamesLines: a refused file exits 1 with each
// problem as FILE:LINE: message.
func TestRun_TagsImport_RefusedNamesLines(t *testing.T) {
	clearEnv(t)
	d := newProjectDaemon(t)
	f := filepath.Join(t.TempDir(), "tags.csv")
	os.WriteFile(f, []byte("path,device,address\nbad\n"), 0o644)
	code, _, errOut := runCLI("--url", d.srv.URL, "tags", "import", f)
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, errOut)
	}
	for _, want := range []string{
		"qubiqctl: " + f + `:3: tag "L/C": unknown device "simm"` + "\n",
		"qubiqctl: " + f + `: /etc/qubiq/project.yaml:9: tag "L/D": bad` + "\n",
		"2 problem(s); nothing was imported",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	// A project import is sent as it is: the daemon's file lines are the
	// file's.
	p := filepath.Join(t.TempDir(), "plant.yaml")
	os.WriteFile(p, []byte("bad: 1\n"), 0o644)
	code, _, errOut = runCLI("--url", d.srv.URL, "project", "import", p)
	if code != 1 || !strings.Contains(errOut, "qubiqctl: "+p+`:9: tag "L/D": bad`) {
		t.Fatalf("project import: exit %d\n%s", code, errOut)
	}
	code, out, _ := runCLI("--url", d.srv.URL, "--json", "project", "import", p)
	var prob struct {
		Errors []struct{ Line int } `json:"errors"`
	}
	if code != 1 || json.Unmarshal([]byte(out), &prob) != nil || len(prob.Errors) != 2 {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}
}

func TestRun_Export_ToFileAndStdout(t *testing.T) {
	clearEnv(t)
	d := newProjectDaemon(t)
	dir := t.TempDir()
	tests := []struct {
		args   []string
		file   string
		want   string
		stdout string
	}{
		{args: []string{"project", "export"}, stdout: "devices: []\n"},
		{args: []string{"project", "export", "-o", filepath.Join(dir, "p.yaml")}, file: "p.yaml", want: "devices: []\n"},
		{args: []string{"tags", "export"}, stdout: "export:csv"},
		{args: []string{"tags", "export", "--format", "yaml"}, stdout: "export:yaml"},
		{args: []string{"tags", "export", "-o", filepath.Join(dir, "t.yml")}, file: "t.yml", want: "export:yaml"},
		{args: []string{"tags", "export", "-o", filepath.Join(dir, "t.csv")}, file: "t.csv", want: "export:csv"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(append([]string{"--url", d.srv.URL}, tt.args...)...)
			if code != 0 || out != tt.stdout {
				t.Fatalf("exit %d stdout %q stderr %s", code, out, errOut)
			}
			if tt.file != "" {
				if b, err := os.ReadFile(filepath.Join(dir, tt.file)); err != nil || string(b) != tt.want {
					t.Fatalf("%s = %q, %v", tt.file, b, err)
				}
			}
		})
	}
}

func TestRun_TagsImportBrowse_MakesTags(t *testing.T) {
	clearEnv(t)
	d := newProjectDaemon(t)
	code, out, errOut := runCLI("--url", d.srv.URL, "tags", "import", "--browse", "ua", "--root", "i=85",
		"--prefix", "/Site/UA/", "--scan", "500ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := `tags:
  - {"path":"Site/UA/Plc/Speed","device":"ua","address":"nsu=urn:p;s=Speed","type":"auto","scan":"500ms"}
  - {"path":"Site/UA/Plc/Temp _C_","device":"ua","address":"nsu=urn:p;s=Temp","type":"auto","scan":"500ms","read_only":true}
  - {"path":"Site/UA/Plc/Speed_2","device":"ua","address":"nsu=urn:p;s=Speed2","type":"auto","scan":"500ms"}
  - {"path":"Site/UA/Plc/Axis/Pos","device":"ua","address":"nsu=urn:p;s=Pos","type":"auto","scan":"500ms"}
  - {"path":"Site/UA/Status","device":"ua","address":"nsu=urn:p;s=Status","type":"auto","scan":"500ms","read_only":true}
`
	if d.body != want {
		t.Fatalf("imported tag file:\n%s\nwant\n%s", d.body, want)
	}
	r := d.requests()
	if last := r[len(r)-1]; last != "POST /api/v1/tags/import?format=yaml application/yaml" {
		t.Fatalf("import request %q", last)
	}
	if !strings.Contains(out, "Site/UA/Plc/Axis/Pos") && !strings.Contains(out, "L/A") {
		t.Fatalf("output %s", out)
	}
	// --depth 1 stays at the root's children; -o writes the file.
	f := filepath.Join(t.TempDir(), "ua.yaml")
	code, _, errOut = runCLI("--url", d.srv.URL, "tags", "import", "--browse", "ua", "--root", "i=85", "--depth", "1", "-o", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if b, _ := os.ReadFile(f); string(b) != "tags:\n  - {\"path\":\"Status\",\"device\":\"ua\",\"address\":\"nsu=urn:p;s=Status\",\"type\":\"auto\",\"read_only\":true}\n" {
		t.Fatalf("-o file:\n%s", b)
	}
	for _, bad := range [][]string{
		{"tags", "import", "--browse", "ua", "x.csv"},
		{"tags", "import", "x.csv", "--root", "i=85"},
		{"tags", "import", "--browse", "ua", "--scan", "fast"},
	} {
		if code, _, errOut := runCLI(append([]string{"--url", d.srv.URL}, bad...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", bad, code, errOut)
		}
	}
}

func TestRun_DevicesBrowse_Table(t *testing.T) {
	clearEnv(t)
	d := newProjectDaemon(t)
	code, out, errOut := runCLI("--url", d.srv.URL, "devices", "browse", "ua", "nsu=urn:p;s=Axis")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "NODE ID          BROWSE NAME  CLASS     DATA TYPE  WRITABLE\nnsu=urn:p;s=Pos  Pos          Variable             yes\n"
	if out != want {
		t.Fatalf("output\n%q\nwant\n%q", out, want)
	}
}
