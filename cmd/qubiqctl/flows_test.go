package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const flowsBody = `[{"name":"scale","version":3,"state":"failed","reason":"node py failed: timeout: ran past its timeout","trigger":"tag Line1/In",
"queue":2,"queue_size":100,"counters":{"in":10,"processed":7,"out":5,"filtered":1,"errors":1,"dropped":1,"timeouts":1},
"last_error":{"time":"2026-03-10T10:00:00Z","node":"py","kind":"timeout","message":"ran past its timeout"},
"nodes":[{"id":"py","type":"python","state":"failed","runs":7,"errors":1,"timeouts":1}]}]`

// TestFlows_ListShowReset: list is a table of state and counters with the
// last error and why a flow is failed or stopped; show adds the nodes;
// reset posts to the flow's reset route.
func TestFlows_ListShowReset(t *testing.T) {
	clearEnv(t)
	one := strings.TrimSuffix(strings.TrimPrefix(flowsBody, "["), "]")
	d := newFakeDaemon(t, map[string]answer{
		"GET /api/v1/flows":              {200, flowsBody},
		"GET /api/v1/flows/scale":        {200, one},
		"POST /api/v1/flows/scale/reset": {200, strings.Replace(one, `"state":"failed"`, `"state":"running"`, 1)},
	})
	code, out, errOut := runCLI("--url", d.srv.URL, "flows", "list")
	if code != 0 || !strings.Contains(out, "NAME   STATE   VERSION  TRIGGER       QUEUE  IN  PROCESSED  OUT  FILTERED  ERRORS  DROPPED  TIMEOUTS  LAST ERROR") ||
		!strings.Contains(out, "scale  failed  3        tag Line1/In  2/100  10  7          5    1         1       1        1         2026-03-10T10:00:00.000Z py: timeout: ran past its timeout  node py failed: timeout: ran past its timeout") {
		t.Errorf("list: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI("--url", d.srv.URL, "flows", "show", "scale")
	if code != 0 || !strings.Contains(out, "reason      node py failed") || !strings.Contains(out, "py    python  failed  7     1       1") {
		t.Errorf("show: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI("--url", d.srv.URL, "flows", "reset", "scale")
	if code != 0 || out != "flow scale reset: running (version 3)\n" {
		t.Errorf("reset: exit %d %q", code, out)
	}
	if r := d.find(t, "POST", "/api/v1/flows/scale/reset"); r.body != "{}" {
		t.Errorf("reset body %q", r.body)
	}
	code, _, errOut = runCLI("--url", d.srv.URL, "flows", "reset")
	if code != exitUsage || !strings.Contains(errOut, "usage: qubiqctl flows reset NAME") {
		t.Errorf("reset without a name: exit %d %q", code, errOut)
	}
}

// TestFlows_List_StoppedSaysWhy: a stopped flow, which has no last node
// error, shows its reason in the list, not only in show.
func TestFlows_List_StoppedSaysWhy(t *testing.T) {
	clearEnv(t)
	why := `flow \"scale-speed2\" version 2, node \"scale\": module 'os' is not available (line 1, column 1, counted in the node's code:)`
	d := newFakeDaemon(t, map[string]answer{
		"GET /api/v1/flows": {200, `[{"name":"scale-speed2","version":2,"state":"stopped","reason":"` + why + `","trigger":"tag Line1/In",
"queue":0,"queue_size":100,"counters":{},"nodes":[]},{"name":"ok","version":1,"state":"running","trigger":"tag Line1/In","queue":0,"queue_size":100,"counters":{},"nodes":[]}]`},
	})
	code, out, errOut := runCLI("--url", d.srv.URL, "flows", "list")
	if code != 0 || !strings.Contains(out, "LAST ERROR  REASON\n") ||
		!strings.Contains(out, `-           flow "scale-speed2" version 2, node "scale": module 'os' is not available (line 1, column 1, counted in the node's code:)`) {
		t.Errorf("list: exit %d\n%s%s", code, out, errOut)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "ok" && f[len(f)-1] != "-" {
			t.Errorf("a running flow's reason is not -: %q", line)
		}
	}
}

// TestFlows_Push: the file goes as the definition's YAML text.
func TestFlows_Push(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{
		"PUT /api/v1/flows/scale": {200, `{"name":"scale","version":4,"carried":12,"dropped":0}`},
	})
	file := filepath.Join(t.TempDir(), "scale.yaml")
	if err := os.WriteFile(file, []byte("trigger: {tag: Line1/In}\nnodes: [{id: e, type: end}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("--url", d.srv.URL, "flows", "push", "scale", file)
	if code != 0 || out != "flow scale saved: version 4 running; 12 queued messages taken over, 0 dropped\n" {
		t.Errorf("push: exit %d %q %s", code, out, errOut)
	}
	if r := d.find(t, "PUT", "/api/v1/flows/scale"); r.body != `{"definition":"trigger: {tag: Line1/In}\nnodes: [{id: e, type: end}]\n"}` {
		t.Errorf("push body %s", r.body)
	}
}
