package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMain lets the test binary act as qubiqctl (QUBIQCTL_TEST_MAIN=1), so
// the completion scripts can be run by a real shell against it.
func TestMain(m *testing.M) {
	if os.Getenv("QUBIQCTL_TEST_MAIN") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const tagListBody = `[{"path":"Line1/Pump/Speed","device":"plc1","address":"HR100","type":"float32","write_level":"operate","read_only":false},
{"path":"Line1/Pump/Setpoint","device":"plc1","address":"HR102","type":"float32","write_level":"operate","read_only":false},
{"path":"Line1/Tank/Level","device":"plc1","address":"IR0","type":"int16","write_level":"operate","read_only":true},
{"path":"Line2/Pump/Speed","device":"ua1","address":"nsu=urn:x;s=S","type":"auto","write_level":"operate","read_only":false}]`

const devicesBody = `[{"name":"plc1","driver":"modbus","url":"tcp://10.0.0.5:502","state":"connected","tags":3},
{"name":"ua1","driver":"opcua","url":"opc.tcp://10.0.0.6:4840","state":"connecting","reason":"dial tcp: refused","tags":1},
{"name":"sim","driver":"sim","state":"connected","tags":0}]`

// TestComplete: the candidates of the word under the cursor, for command
// words, flags, flag values, and tag paths and device names asked of the
// daemon named on the line.
func TestComplete(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"GET /api/v1/tags": {200, tagListBody}, "GET /api/v1/devices": {200, devicesBody}})
	u := "--url " + d.srv.URL + " "
	tests := []struct {
		line string
		want []string
	}{
		{"qubiqctl ", nil}, // checked below: every top-level word
		{"qubiqctl ta", []string{"tags"}},
		{"qubiqctl tags ", []string{"list", "read", "watch", "write", "import", "export"}},
		{"qubiqctl tags w", []string{"watch", "write"}},
		{"qubiqctl devices certs ", []string{"list", "trust", "reject"}},
		{"qubiqctl help dev", []string{"devices"}},
		{"qubiqctl help devices c", []string{"certs"}},
		{"qubiqctl completion ", []string{"bash", "zsh"}},
		{"qubiqctl --js", []string{"--json"}},
		{"qubiqctl tags watch --l", []string{"--lines"}},
		{"qubiqctl tags export --format ", []string{"csv", "yaml"}},
		{"qubiqctl tags export --format=y", []string{"--format=yaml"}},
		{"qubiqctl apikeys create --scopes tag:read,tag:", []string{"tag:read,tag:write"}},
		{"qubiqctl users add --realm o", []string{"operator"}},
		{"qubiqctl " + u + "tags read ", []string{"Line1/", "Line2/"}},
		{"qubiqctl " + u + "tags read Line1/P", []string{"Line1/Pump/"}},
		{"qubiqctl " + u + "tags watch --lines Line1/Pump/S", []string{"Line1/Pump/Setpoint", "Line1/Pump/Speed"}},
		{"qubiqctl tags write " + u + "Line2/Pump/", []string{"Line2/Pump/Speed"}},
		{"qubiqctl " + u + "devices plan ", []string{"plc1"}},
		{"qubiqctl " + u + "devices certs trust ", []string{"ua1"}},
		{"qubiqctl " + u + "devices show s", []string{"sim"}},
		{"qubiqctl " + u + "devices show sim ", nil},
		{"qubiqctl scripts push pumps ", nil}, // file names: the shell's
		{"qubiqctl --url http://127.0.0.1:1 tags read L", nil},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got := complete(context.Background(), &cli{}, tt.line)
			if tt.line == "qubiqctl " {
				for _, w := range []string{"status", "tags", "devices", "scripts", "project", "packages", "apikeys", "users", "audit", "provision", "completion", "help"} {
					if !strings.Contains(strings.Join(got, " ")+" ", w+" ") {
						t.Errorf("top level lacks %q: %q", w, got)
					}
				}
				return
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCompletion_Bash sources the bash script in a real bash, with the
// test binary as qubiqctl, and completes as bash would: the script strips
// what bash split off at ':' and '='.
func TestCompletion_Bash(t *testing.T) {
	clearEnv(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("no bash: %v", err)
	}
	d := newFakeDaemon(t, map[string]answer{"GET /api/v1/tags": {200, tagListBody}})
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(dir, "qubiqctl")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		words string // COMP_WORDS as bash splits the line
		line  string // COMP_LINE
		want  string
	}{
		{`qubiqctl ta`, "qubiqctl ta", "tags"},
		{`qubiqctl tags read Line1/P`, "qubiqctl tags read Line1/P", "Line1/Pump/"},
		{`qubiqctl apikeys create --scopes tag : w`, "qubiqctl apikeys create --scopes tag:w", "write"},
		{`qubiqctl apikeys create --scopes tag : r`, "qubiqctl apikeys create --scopes tag:r", "read"},
		{`qubiqctl tags export --format = y`, "qubiqctl tags export --format=y", "yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			n := len(strings.Fields(tt.words))
			script := `source <(qubiqctl completion bash)
COMP_WORDS=(` + tt.words + `); COMP_CWORD=` + strconv.Itoa(n-1) + `; COMP_LINE='` + tt.line + `'; COMP_POINT=${#COMP_LINE}
_qubiqctl; printf '%s\n' "${COMPREPLY[@]}"`
			cmd := exec.Command(bash, "--norc", "--noprofile", "-c", script)
			cmd.Env = append(os.Environ(), "QUBIQCTL_TEST_MAIN=1", "GORACE=atexit_sleep_ms=0", "PATH="+dir+":"+os.Getenv("PATH"), "QUBIQ_URL="+d.srv.URL)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("bash: %v: %s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != tt.want {
				t.Errorf("COMPREPLY %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCompletion_Scripts: both scripts come out of `completion`, call the
// __complete helper and register for qubiqctl; bash parses its script, and
// zsh its, where zsh is installed.
func TestCompletion_Scripts(t *testing.T) {
	clearEnv(t)
	for _, sh := range []string{"bash", "zsh"} {
		code, out, errOut := runCLI("completion", sh)
		if code != 0 || errOut != "" {
			t.Fatalf("completion %s: exit %d stderr %q", sh, code, errOut)
		}
		if !strings.Contains(out, "__complete") || !strings.Contains(out, "qubiqctl\n") {
			t.Errorf("completion %s:\n%s", sh, out)
		}
		path, err := exec.LookPath(sh)
		if err != nil {
			if sh == "zsh" {
				t.Logf("zsh is not installed on this machine: its script is not parsed by zsh")
				continue
			}
			t.Fatalf("no %s: %v", sh, err)
		}
		cmd := exec.Command(path, "-n")
		cmd.Stdin = strings.NewReader(out)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v: %s", sh, err, b)
		}
	}
}
