//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/internal/peers"
)

// startQubiqd runs the built qubiqd (QUBIQ_BIN, else a fresh build) on a
// free loopback port with a simulator project, and returns its URL and
// bootstrap token. Without a Python runtime it runs degraded, which the
// tag commands do not need.
func startQubiqd(t *testing.T) (string, string) {
	t.Helper()
	bin := os.Getenv("QUBIQ_BIN")
	if bin == "" {
		bin = t.TempDir()
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "qubiqd"), "qubiq.dev/edge/cmd/qubiqd").CombinedOutput(); err != nil {
			t.Fatalf("build qubiqd: %v: %s", err, out)
		}
	}
	dir := t.TempDir()
	port := peers.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	cfg := fmt.Sprintf("data_dir: data\nproject: project.yaml\nhttp: {listen: \"127.0.0.1:%d\"}\npython: {path: /nonexistent/python3}\n", port)
	project := `devices:
  - {name: sim, driver: sim}
tags:
  - {path: Line1/Pump/Speed, device: sim, address: "ramp(0,1000,2s)", type: float64, scan: 100ms}
  - {path: Line1/Pump/Set, device: sim, address: memory, type: int32, scan: 100ms}
  - {path: Line1/Tank/Level, device: sim, address: "random(40,60)", type: float32}
`
	for name, body := range map[string]string{"qubiq.yaml": cfg, "project.yaml": project} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var log bytes.Buffer
	var mu sync.Mutex
	cmd := exec.Command(filepath.Join(bin, "qubiqd"), "--config", filepath.Join(dir, "qubiq.yaml"))
	cmd.Env = append(os.Environ(), "PYTHON_PATH=")
	cmd.Stdout, cmd.Stderr = lockedBuf{&mu, &log}, lockedBuf{&mu, &log}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("qubiqd log:\n%s", log.String())
			mu.Unlock()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("qubiqd exited: %v\n%s", err, log.String())
		default:
		}
		if resp, err := http.Get(url + "/api/v1/health"); err == nil {
			resp.Body.Close()
			tok, err := os.ReadFile(filepath.Join(dir, "data", "bootstrap-token"))
			if err == nil {
				return url, strings.TrimSpace(string(tok))
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("qubiqd did not answer within 30s")
	return "", ""
}

type lockedBuf struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedBuf) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestLive_TagCommands drives the new tag commands against a real qubiqd:
// a folder read, a watch that sees the ramp move and a write arrive, and
// the plan of a simulator device.
func TestLive_TagCommands(t *testing.T) {
	url, token := startQubiqd(t)
	t.Setenv("QUBIQ_URL", url)
	t.Setenv("QUBIQ_API_KEY", token)

	code, out, errOut := runCLI("tags", "read", "Line1")
	if code != 0 || strings.Count(out, "\n") != 4 || !strings.Contains(out, "Line1/Tank/Level") {
		t.Errorf("tags read Line1: exit %d stderr %q\n%s", code, errOut, out)
	}

	var wg sync.WaitGroup
	var wcode int
	var wout, werr string
	wg.Add(1)
	go func() {
		defer wg.Done()
		var o, e bytes.Buffer
		wcode = run(context.Background(), []string{"tags", "watch", "--lines", "--for", "2s", "Line1/Pump"}, &o, &e)
		wout, werr = o.String(), e.String()
	}()
	time.Sleep(700 * time.Millisecond)
	if code, _, errOut := runCLI("tags", "write", "Line1/Pump/Set=42"); code != 0 {
		t.Errorf("tags write: exit %d %s", code, errOut)
	}
	wg.Wait()
	if wcode != 0 {
		t.Fatalf("watch: exit %d stderr %q", wcode, werr)
	}
	speeds := 0
	for _, l := range strings.Split(wout, "\n") {
		if strings.Contains(l, "Line1/Pump/Speed") && strings.HasSuffix(l, "Good") {
			speeds++
		}
	}
	if speeds < 5 {
		t.Errorf("watch saw the 100ms ramp change %d times in 2s:\n%s", speeds, wout)
	}
	if !strings.Contains(wout, "Line1/Pump/Set    42  Good") {
		t.Errorf("watch did not see the write of 42:\n%s", wout)
	}

	code, _, errOut = runCLI("devices", "plan", "sim")
	if code != 1 || !strings.Contains(errOut, "device sim uses driver sim: a request plan exists for Modbus devices only") {
		t.Errorf("devices plan sim: exit %d stderr %q", code, errOut)
	}
}
