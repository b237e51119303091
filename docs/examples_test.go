package docs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"qubiq.dev/edge/config"
)

// repoRoot is the repository root, one level up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s", root)
	}
	return root
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
	builtIn string // the temporary directory of a fresh build, removed at the end
)

func TestMain(m *testing.M) {
	code := m.Run()
	if builtIn != "" {
		os.RemoveAll(builtIn)
	}
	os.Exit(code)
}

// bins returns the directory holding qubiqd and qubiqctl: QUBIQ_BIN (make
// test sets it), else a fresh build into a temporary directory.
func bins(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if d := os.Getenv("QUBIQ_BIN"); d != "" {
			binDir = d
			return
		}
		dir, err := os.MkdirTemp("", "qubiq-docs-bin-")
		if err != nil {
			binErr = err
			return
		}
		for _, c := range []string{"qubiqd", "qubiqctl"} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(dir, c), "qubiq.dev/edge/cmd/"+c).CombinedOutput()
			if err != nil {
				binErr = fmt.Errorf("build %s: %v: %s", c, err, out)
				return
			}
		}
		binDir, builtIn = dir, dir
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

// python returns the interpreter of the Python checks: PYTHON_PATH, else
// /usr/bin/python3 (make test installs it).
func python(t *testing.T) string {
	t.Helper()
	p := os.Getenv("PYTHON_PATH")
	if p == "" {
		p = "/usr/bin/python3"
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the Python examples need an interpreter: %v (set PYTHON_PATH, or run scripts/ensure-deps.sh)", err)
	}
	return p
}

// scriptAllowList is the import allow-list of scripts (docs/scripting.md,
// "What a script may import"), as the daemon passes it to the save-time
// check without installed packages.
var scriptAllowList = []string{"datetime", "json", "math", "system"}

// configKeys are the top-level keys of the daemon config: a YAML example
// with one of them is a daemon config, any other a project file.
var configKeys = []string{"appliance_id", "data_dir", "project", "http", "python", "security", "store", "history", "mqtt", "diagnostics", "firmware", "log"}

// standardDevices are added to a project example whose tags name them
// without defining them (docs/README.md, "Examples in these pages are
// tested").
var standardDevices = map[string]string{
	"plc1": `{name: plc1, driver: modbus, url: "tcp://10.0.0.5:502"}`,
	"rtu1": `{name: rtu1, driver: modbus, url: "rtu:///dev/ttyUSB0"}`,
	"ua1":  `{name: ua1, driver: opcua, url: "opc.tcp://10.0.0.6:4840"}`,
	"sim":  `{name: sim, driver: sim}`,
}

// outcome is what one check said: nil when the example passed, else the
// error output that refused it.
type outcome error

// TestExamples checks every fenced example of docs/*.md and README.md
// (docs/README.md says how), and that the pages hold examples of every
// kind, deliberately wrong ones included, so the check cannot pass by
// finding nothing.
func TestExamples(t *testing.T) {
	root := repoRoot(t)
	fences := allFences(t, root)
	files := pythonFiles(fences)
	counts := map[string]int{}
	for _, f := range fences {
		var check func(*testing.T, string, fence, map[string]string) outcome
		switch f.lang {
		case "yaml", "yml":
			check = checkYAML
		case "csv":
			check = checkCSV
		case "python", "py":
			check = checkPython
		case "sh", "bash", "shell", "console":
			check = checkShell
		default:
			continue
		}
		kind := f.lang
		if f.bad() {
			kind += " bad"
		}
		counts[kind]++
		t.Run(f.name(), func(t *testing.T) {
			err := check(t, root, f, files[f.file])
			switch {
			case f.bad() && err == nil:
				t.Errorf("%s: a `bad` example passed its check; it must fail\n%s", f.name(), f.body)
			case f.bad() && f.attrs["want"] != "" && !strings.Contains(err.Error(), f.attrs["want"]):
				t.Errorf("%s: a `bad` example failed, but its error lacks %q:\n%v", f.name(), f.attrs["want"], err)
			case !f.bad() && err != nil:
				t.Errorf("%s: example refused:\n%v\n--- example ---\n%s", f.name(), err, f.body)
			}
		})
	}
	t.Logf("examples checked: %v", counts)
	for _, k := range []string{"yaml", "yaml bad", "csv", "csv bad", "python", "python bad", "sh"} {
		if counts[k] == 0 {
			t.Errorf("no %q example found in the pages: the extractor or the pages are broken", k)
		}
	}
}

// pythonFiles maps, per page, each file=PATH of a Python example to its
// code, for the project examples of the same page.
func pythonFiles(fences []fence) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, f := range fences {
		if p := f.attrs["file"]; p != "" && (f.lang == "python" || f.lang == "py") {
			if out[f.file] == nil {
				out[f.file] = map[string]string{}
			}
			out[f.file][p] = f.body
		}
	}
	return out
}

// checkYAML checks a YAML example: a fragment is only parsed; a daemon
// config and a project file go through qubiqd --check-config.
func checkYAML(t *testing.T, root string, f fence, files map[string]string) outcome {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(f.body), &doc); err != nil {
		return err
	}
	if f.fragment() {
		return nil
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return errors.New("not a mapping at the top: mark a piece of a document `fragment`")
	}
	dir := t.TempDir()
	if isConfig(doc.Content[0]) {
		return checkDaemonConfig(t, dir, f.body)
	}
	return checkProject(t, dir, f.body, files)
}

func isConfig(top *yaml.Node) bool {
	for i := 0; i+1 < len(top.Content); i += 2 {
		if slices.Contains(configKeys, top.Content[i].Value) {
			return true
		}
	}
	return false
}

// checkDaemonConfig writes the config as qubiq.yaml into dir, with an
// empty project file where it names a relative one that does not exist,
// and runs qubiqd --check-config on it.
func checkDaemonConfig(t *testing.T, dir, body string) outcome {
	var c struct {
		Project string `yaml:"project"`
	}
	_ = yaml.Unmarshal([]byte(body), &c)
	if c.Project != "" && !filepath.IsAbs(c.Project) {
		write(t, filepath.Join(dir, c.Project), "devices: []\n")
	}
	write(t, filepath.Join(dir, "qubiq.yaml"), body)
	return checkConfig(t, filepath.Join(dir, "qubiq.yaml"))
}

// checkProject writes the project (with the standard devices its tags
// need and the files it names) into dir, beside a daemon config naming it,
// and runs qubiqd --check-config.
func checkProject(t *testing.T, dir, body string, files map[string]string) outcome {
	doc, err := withDevices(body)
	if err != nil {
		return err
	}
	var p struct {
		Scripts []struct {
			File     string   `yaml:"file"`
			LiveView []string `yaml:"liveview"`
		} `yaml:"scripts"`
		Connections []struct {
			DSNFile string `yaml:"dsn_file"`
		} `yaml:"connections"`
	}
	_ = yaml.Unmarshal([]byte(body), &p)
	for _, s := range p.Scripts {
		if s.File == "" || filepath.IsAbs(s.File) {
			continue
		}
		code, ok := files[s.File]
		if !ok {
			var b strings.Builder
			for _, e := range s.LiveView {
				fmt.Fprintf(&b, "def %s(args):\n    return None\n\n", e)
			}
			code = b.String()
		}
		write(t, filepath.Join(dir, s.File), code)
	}
	for _, c := range p.Connections {
		if c.DSNFile != "" && !filepath.IsAbs(c.DSNFile) {
			write(t, filepath.Join(dir, c.DSNFile), "postgres://qubiq@127.0.0.1:5432/plant?sslmode=disable\n")
		}
	}
	write(t, filepath.Join(dir, "project.yaml"), doc)
	write(t, filepath.Join(dir, "qubiq.yaml"), "data_dir: data\nproject: project.yaml\n")
	return checkConfig(t, filepath.Join(dir, "qubiq.yaml"))
}

// withDevices returns the project document with the standard devices its
// tags name but it does not define appended to its devices.
func withDevices(body string) (string, error) {
	var p struct {
		Devices []struct {
			Name string `yaml:"name"`
		} `yaml:"devices"`
		Tags []struct {
			Device string `yaml:"device"`
		} `yaml:"tags"`
	}
	if err := yaml.Unmarshal([]byte(body), &p); err != nil {
		// A document of the wrong shape is checked as it is:
		// qubiqd --check-config names the problem.
		return body, nil
	}
	have := map[string]bool{}
	for _, d := range p.Devices {
		have[d.Name] = true
	}
	var add []string
	for _, tg := range p.Tags {
		if d, ok := standardDevices[tg.Device]; ok && !have[tg.Device] {
			have[tg.Device] = true
			add = append(add, d)
		}
	}
	if len(add) == 0 {
		return body, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(body), &root); err != nil {
		return "", err
	}
	top := root.Content[0]
	var seq *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "devices" {
			seq = top.Content[i+1]
		}
	}
	if seq == nil {
		seq = &yaml.Node{Kind: yaml.SequenceNode}
		top.Content = append(top.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "devices"}, seq)
	}
	if seq.Kind != yaml.SequenceNode {
		return body, nil
	}
	for _, d := range add {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(d), &n); err != nil {
			return "", err
		}
		seq.Content = append(seq.Content, n.Content[0])
	}
	out, err := yaml.Marshal(&root)
	return string(out), err
}

// checkConfig runs qubiqd --check-config --config cfg: nil when it exits
// 0, else an error holding its output.
func checkConfig(t *testing.T, cfg string) outcome {
	cmd := exec.Command(filepath.Join(bins(t), "qubiqd"), "--check-config", "--config", cfg)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return errors.New(string(out))
	}
	t.Fatalf("qubiqd --check-config did not run: %v: %s", err, out)
	return nil
}

// checkCSV reads a tag CSV example with the tag importer, then checks its
// tags in a project (with the standard devices) with --check-config.
func checkCSV(t *testing.T, _ string, f fence, files map[string]string) outcome {
	tags, err := config.ParseTagsCSV([]byte(f.body))
	if err != nil {
		return err
	}
	doc, err := config.FormatTagsYAML(tags)
	if err != nil {
		return err
	}
	return checkProject(t, t.TempDir(), string(doc), files)
}

// checkPython runs the daemon's save-time check (sandbox/python/
// qubiq_check.py) on a Python example: nil when it finds no error, else
// the errors, one per line. A fragment is checked as the body of a
// function.
func checkPython(t *testing.T, root string, f fence, _ map[string]string) outcome {
	src := f.body
	if f.fragment() {
		var b strings.Builder
		b.WriteString("def fragment(args):\n")
		for l := range strings.Lines(src) {
			b.WriteString("    " + l)
		}
		b.WriteString("    pass\n")
		src = b.String()
	}
	codeDir := filepath.Join(root, "sandbox", "python")
	req, err := json.Marshal(map[string]any{"module": "example", "source": src, "allowed": scriptAllowList, "installed": []string{}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python(t), "-I", "-S", filepath.Join(codeDir, "qubiq_check.py"), codeDir)
	cmd.Stdin = bytes.NewReader(req)
	cmd.Env = cleanEnv()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("qubiq_check.py: %v", err)
	}
	var res struct {
		Diagnostics []struct {
			Line     int    `json:"line"`
			Column   int    `json:"column"`
			Code     string `json:"code"`
			Message  string `json:"message"`
			Severity string `json:"severity"`
		} `json:"diagnostics"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("qubiq_check.py answered %q: %v", out, err)
	}
	var errs []string
	for _, d := range res.Diagnostics {
		if d.Severity == "error" {
			errs = append(errs, fmt.Sprintf("line %d, column %d: %s %s", d.Line, d.Column, d.Code, d.Message))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	return nil
}

// cleanEnv is the environment of the checks: the test's, without the
// variables that would change what the binaries read.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "QUBIQ_URL", "QUBIQ_API_KEY", "QUBIQ_TLS_FINGERPRINT", "PYTHON_WORKER_REPLICAS", "PYTHONPATH":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDemo checks the demo that `make run` copies into var/: its config
// and project pass --check-config and its script the save-time check.
func TestDemo(t *testing.T) {
	root := repoRoot(t)
	if err := checkConfig(t, filepath.Join(root, "examples", "demo", "qubiq.yaml")); err != nil {
		t.Errorf("examples/demo/qubiq.yaml: %v", err)
	}
	code, err := os.ReadFile(filepath.Join(root, "examples", "demo", "scripts", "pumps.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPython(t, root, fence{lang: "python", body: string(code)}, nil); err != nil {
		t.Errorf("examples/demo/scripts/pumps.py: %v", err)
	}
}
