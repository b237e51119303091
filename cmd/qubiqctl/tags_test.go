package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/api/apitypes"
)

// tagDaemon answers GET /api/v1/tags with tagListBody's tags and POST
// /api/v1/tags/read with a value for each path asked (Bad_NodeIdUnknown for
// a path that is not a tag), recording the paths of every read.
type tagDaemon struct {
	srv   *httptest.Server
	mu    sync.Mutex
	reads [][]string
	lists int
}

func newTagDaemon(t *testing.T) *tagDaemon {
	t.Helper()
	var infos []apitypes.TagInfo
	if err := json.Unmarshal([]byte(tagListBody), &infos); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, i := range infos {
		known[i.Path] = true
	}
	d := &tagDaemon{}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Method + " " + r.URL.Path {
		case "GET /api/v1/tags":
			d.mu.Lock()
			d.lists++
			d.mu.Unlock()
			fmt.Fprint(w, tagListBody)
		case "POST /api/v1/tags/read":
			var req apitypes.ReadRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			d.mu.Lock()
			d.reads = append(d.reads, req.Paths)
			d.mu.Unlock()
			ts := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
			out := make([]apitypes.TagValue, len(req.Paths))
			for i, p := range req.Paths {
				out[i] = apitypes.TagValue{Path: p, Value: int64(i), Quality: "Good", Timestamp: ts}
				if !known[p] {
					out[i] = apitypes.TagValue{Path: p, Quality: "Bad_NodeIdUnknown", Timestamp: ts, Reason: "unknown tag"}
				}
			}
			_ = json.NewEncoder(w).Encode(out)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *tagDaemon) readPaths() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, r := range d.reads {
		out = append(out, strings.Join(r, ","))
	}
	return out
}

// TestTagsRead_Selection: folders, patterns and --all become the tags they
// choose (sorted, without repeats); plain paths are read with one request
// and no tag list; a path that reads Bad_NodeIdUnknown but is a folder is
// read as the tags below it.
func TestTagsRead_Selection(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		args      []string
		wantReads []string
		wantLists int
		wantPaths string // of the table, in order
	}{
		{[]string{"Line1/Tank/Level", "Line2/Pump/Speed"}, []string{"Line1/Tank/Level,Line2/Pump/Speed"}, 0,
			"Line1/Tank/Level Line2/Pump/Speed"},
		{[]string{"Line1/Pump"}, []string{"Line1/Pump", "Line1/Pump/Setpoint,Line1/Pump/Speed"}, 1,
			"Line1/Pump/Setpoint Line1/Pump/Speed"},
		{[]string{"Line1/*"}, []string{"Line1/Pump/Setpoint,Line1/Pump/Speed,Line1/Tank/Level"}, 1,
			"Line1/Pump/Setpoint Line1/Pump/Speed Line1/Tank/Level"},
		{[]string{"*/Pump/Speed"}, []string{"Line1/Pump/Speed,Line2/Pump/Speed"}, 1, "Line1/Pump/Speed Line2/Pump/Speed"},
		{[]string{"**/Level", "Line1/Tank/Level"}, []string{"Line1/Tank/Level"}, 1, "Line1/Tank/Level"},
		{[]string{"Line?/Pump/Sp*", "Nope/X"}, []string{"Line1/Pump/Speed,Line2/Pump/Speed,Nope/X"}, 1,
			"Line1/Pump/Speed Line2/Pump/Speed Nope/X"},
		{[]string{"--all"}, []string{"Line1/Pump/Speed,Line1/Pump/Setpoint,Line1/Tank/Level,Line2/Pump/Speed"}, 1,
			"Line1/Pump/Speed Line1/Pump/Setpoint Line1/Tank/Level Line2/Pump/Speed"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			d := newTagDaemon(t)
			code, out, errOut := runCLI(append([]string{"--url", d.srv.URL, "tags", "read"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := d.readPaths(); strings.Join(got, " | ") != strings.Join(tt.wantReads, " | ") {
				t.Errorf("reads %q, want %q", got, tt.wantReads)
			}
			if d.lists != tt.wantLists {
				t.Errorf("%d tag lists, want %d", d.lists, tt.wantLists)
			}
			var paths []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
				paths = append(paths, strings.Fields(l)[0])
			}
			if strings.Join(paths, " ") != tt.wantPaths {
				t.Errorf("table paths %q, want %q\n%s", paths, tt.wantPaths, out)
			}
		})
	}
}

// TestTagsRead_SelectionErrors: a pattern that matches nothing is an
// error naming it (nothing read); --all with paths, and nothing at all,
// are usage errors.
func TestTagsRead_SelectionErrors(t *testing.T) {
	clearEnv(t)
	d := newTagDaemon(t)
	code, _, errOut := runCLI("--url", d.srv.URL, "tags", "read", "Line1/*", "Line9/*", "*/Nothing")
	if code != 1 || !strings.Contains(errOut, `no tag matches "Line9/*", "*/Nothing"`) {
		t.Errorf("exit %d stderr %q", code, errOut)
	}
	if len(d.readPaths()) != 0 {
		t.Errorf("reads %q after a refused selection", d.readPaths())
	}
	code, _, errOut = runCLI("--url", d.srv.URL, "tags", "read", "--all", "Line1")
	if code != 2 || !strings.Contains(errOut, "--all takes no PATH") {
		t.Errorf("--all with a path: exit %d stderr %q", code, errOut)
	}
}

// TestTagsRead_Batches: --all over more tags than one request carries is
// read in batches of readBatch, in order.
func TestTagsRead_Batches(t *testing.T) {
	clearEnv(t)
	var tags []apitypes.TagInfo
	for i := range readBatch + 5 {
		tags = append(tags, apitypes.TagInfo{Path: fmt.Sprintf("Big/T%04d", i), Device: "sim", Type: "float64"})
	}
	body, _ := json.Marshal(tags)
	var sizes []int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" {
			w.Write(body)
			return
		}
		var req apitypes.ReadRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		sizes = append(sizes, len(req.Paths))
		mu.Unlock()
		out := make([]apitypes.TagValue, len(req.Paths))
		for i, p := range req.Paths {
			out[i] = apitypes.TagValue{Path: p, Quality: "Good", Value: 1.5, Timestamp: time.Unix(0, 0)}
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	defer srv.Close()
	code, out, errOut := runCLI("--url", srv.URL, "--json", "tags", "read", "--all")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if fmt.Sprint(sizes) != fmt.Sprint([]int{readBatch, 5}) {
		t.Errorf("batch sizes %v", sizes)
	}
	var got []apitypes.TagValue
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != readBatch+5 || got[readBatch].Path != fmt.Sprintf("Big/T%04d", readBatch) {
		t.Errorf("output: %d values, err %v", len(got), err)
	}
}

// TestTagsList_ReadOnlyShowsInWriteLevel: a tag that cannot be written
// shows read-only in the WRITE LEVEL column, not the level its project
// entry would need; the columns stay as they are.
func TestTagsList_ReadOnlyShowsInWriteLevel(t *testing.T) {
	clearEnv(t)
	d := newTagDaemon(t)
	code, out, errOut := runCLI("--url", d.srv.URL, "tags", "list", "Line1/Tank/Level", "Line1/Pump/Speed")
	want := "PATH              TYPE     DEVICE  ADDRESS  WRITE LEVEL  READ-ONLY  UNITS\n" +
		"Line1/Tank/Level  int16    plc1    IR0      read-only    yes\n" +
		"Line1/Pump/Speed  float32  plc1    HR100    operate      no\n"
	if code != 0 || out != want {
		t.Errorf("exit %d stderr %q output:\n%s\nwant:\n%s", code, errOut, out, want)
	}
}

// TestTagsList_Selection: tags list takes the same selectors.
func TestTagsList_Selection(t *testing.T) {
	clearEnv(t)
	d := newTagDaemon(t)
	code, out, errOut := runCLI("--url", d.srv.URL, "tags", "list", "*/Pump/Speed")
	want := "PATH              TYPE     DEVICE  ADDRESS        WRITE LEVEL  READ-ONLY  UNITS\n" +
		"Line1/Pump/Speed  float32  plc1    HR100          operate      no\n" +
		"Line2/Pump/Speed  auto     ua1     nsu=urn:x;s=S  operate      no\n"
	if code != 0 || out != want {
		t.Errorf("exit %d stderr %q output:\n%s\nwant:\n%s", code, errOut, out, want)
	}
}

// TestMatchPattern covers the pattern rules of the selection.
func TestMatchPattern(t *testing.T) {
	tests := []struct {
		pat, path string
		want      bool
	}{
		{"Line1/*", "Line1/Pump/Speed", true},   // * matches the folder Pump: everything below
		{"Line1/*", "Line10/Pump/Speed", false}, // whole segments
		{"*/Pump/Speed", "Line2/Pump/Speed", true},
		{"*/Speed", "Line2/Pump/Speed", false},
		{"**/Speed", "Line2/Pump/Speed", true},
		{"**", "A/B", true},
		{"Line1/**/Level", "Line1/Tank/Level", true},
		{"Line1/**/Level", "Line1/Level", true},
		{"Line[12]/Pump/S?eed", "Line2/Pump/Speed", true},
		{"Line[12]/Pump/S?eed", "Line3/Pump/Speed", false},
		{"Line1/Pump/Speed/*", "Line1/Pump/Speed", false},
	}
	for _, tt := range tests {
		if got := matchPattern(tt.pat, tt.path); got != tt.want {
			t.Errorf("matchPattern(%q, %q) = %v, want %v", tt.pat, tt.path, got, tt.want)
		}
	}
}
