package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const wideningBody = `{"type":"urn:qubiq:problem:acknowledgement_required","title":"Conflict","status":409,` +
	`"detail":"installing widens the script sandbox","kind":"acknowledgement_required",` +
	`"widenings":[{"package":"numpy","version":"1.26.4","requested":true,"widens":["loads native code through ctypes (numpy.ctypeslib.load_library)","generic"]}]}`

const installStream = `{"event":"progress","step":"download","message":"downloading numpy==1.26.4"}
{"event":"progress","step":"pip","message":"Saved ./numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl"}
{"event":"done","result":{"action":"install","packages":["numpy"],"installed":[{"name":"numpy","version":"1.26.4","imports":["numpy"],"requested":true,"requirement":"numpy==1.26.4","source":"index","installed_by":"tech","native":true,"widens":["ctypes","native","generic"]}],"allowed":["datetime","json","math","numpy","system"],"duration_ms":5120}}
`

func TestRun_PackagesInstall(t *testing.T) {
	clearEnv(t)
	refused := newFakeDaemon(t, map[string]answer{"POST /api/v1/sandbox/packages": {409, wideningBody}})
	code, out, errOut := runCLI("--url", refused.srv.URL, "packages", "install", "numpy==1.26.4")
	if code != 1 || !strings.Contains(out, "numpy.ctypeslib") || !strings.Contains(errOut, "--acknowledge-widening") {
		t.Fatalf("unacknowledged: exit %d out %q err %q", code, out, errOut)
	}
	if r := refused.last(t); r.body != `{"requirement":"numpy==1.26.4","acknowledge_widening":false}` {
		t.Errorf("request %+v", r)
	}
	ok := newFakeDaemon(t, map[string]answer{"POST /api/v1/sandbox/packages": {200, installStream}})
	code, out, errOut = runCLI("--url", ok.srv.URL, "--api-key", "k", "packages", "install", "numpy==1.26.4", "--yes")
	if code != 0 || !strings.Contains(out, "install numpy done in 5120 ms") || !strings.Contains(out, "numpy    1.26.4") ||
		!strings.Contains(errOut, "download: downloading numpy==1.26.4") {
		t.Fatalf("acknowledged: exit %d out %q err %q", code, out, errOut)
	}
	if r := ok.last(t); r.body != `{"requirement":"numpy==1.26.4","acknowledge_widening":true}` || r.auth != "Bearer k" {
		t.Errorf("request %+v", r)
	}
	failed := newFakeDaemon(t, map[string]answer{"POST /api/v1/sandbox/packages": {200,
		`{"event":"progress","step":"download","message":"x"}` + "\n" +
			`{"event":"error","error":{"type":"urn:qubiq:problem:install_failed","title":"Bad Gateway","status":502,"detail":"pip failed: no wheel found for numpy","kind":"install_failed"}}` + "\n"}})
	if code, _, errOut := runCLI("--url", failed.srv.URL, "packages", "install", "numpy", "--yes"); code != 1 || !strings.Contains(errOut, "no wheel found for numpy") {
		t.Errorf("failed install: exit %d %q", code, errOut)
	}
}

func TestRun_PackagesUpload(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"POST /api/v1/sandbox/packages/upload": {200, installStream}})
	whl := filepath.Join(t.TempDir(), "qubiq_testpkg-1.0-py3-none-any.whl")
	if err := os.WriteFile(whl, []byte("wheel bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("--url", d.srv.URL, "packages", "upload", whl, "--acknowledge-widening")
	if code != 0 {
		t.Fatalf("upload: exit %d %q", code, errOut)
	}
	r := d.last(t)
	if !strings.Contains(r.body, `filename="qubiq_testpkg-1.0-py3-none-any.whl"`) || !strings.Contains(r.body, "wheel bytes") {
		t.Errorf("upload body %q", r.body)
	}
	if code, _, errOut := runCLI("--url", d.srv.URL, "packages", "upload", "notes.txt"); code != 2 || !strings.Contains(errOut, "not a wheel") {
		t.Errorf("non-wheel: exit %d %q", code, errOut)
	}
}

func TestRun_PackagesListRemoveCheck(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{
		"GET /api/v1/sandbox/packages":                  {200, `[{"name":"qubiq-testpkg","version":"1.0","imports":["qtestpkg"],"requested":true,"requirement":"qubiq-testpkg==1.0","source":"upload","installed_by":"tech","native":false,"widens":["generic"]}]`},
		"DELETE /api/v1/sandbox/packages/qubiq-testpkg": {200, `{"action":"remove","packages":["qubiq-testpkg"],"installed":[],"allowed":["math"],"duration_ms":900}`},
		"DELETE /api/v1/sandbox/packages/ghost":         {404, `{"type":"urn:qubiq:problem:not_found","title":"Not Found","status":404,"detail":"remove ghost: package not installed","kind":"not_found"}`},
		"GET /api/v1/sandbox/check":                     {200, `{"index_url":"http://127.0.0.1:9/simple","url":"http://127.0.0.1:9/simple/pip/","reachable":false,"duration_ms":0.6,"reason":"connection refused: nothing listens at 127.0.0.1:9"}`},
	})
	code, out, _ := runCLI("--url", d.srv.URL, "packages", "list")
	want := "PACKAGE        VERSION  IMPORTS   REQUESTED           SOURCE  BY    WIDENS\n" +
		"qubiq-testpkg  1.0      qtestpkg  qubiq-testpkg==1.0  upload  tech  generic\n"
	if code != 0 || out != want {
		t.Errorf("list: exit %d\n%s\nwant\n%s", code, out, want)
	}
	if code, out, _ := runCLI("--url", d.srv.URL, "packages", "remove", "qubiq-testpkg"); code != 0 || !strings.Contains(out, "remove qubiq-testpkg done") {
		t.Errorf("remove: exit %d %q", code, out)
	}
	if code, _, errOut := runCLI("--url", d.srv.URL, "packages", "remove", "ghost"); code != 1 || !strings.Contains(errOut, "not installed") {
		t.Errorf("remove ghost: exit %d %q", code, errOut)
	}
	code, out, errOut := runCLI("--url", d.srv.URL, "packages", "check")
	if code != 1 || !strings.Contains(out, "reachable  no") || !strings.Contains(errOut, "connection refused") {
		t.Errorf("check: exit %d %q %q", code, out, errOut)
	}
}
