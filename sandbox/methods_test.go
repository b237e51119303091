package sandbox

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The system.* surface has one table (methods). The worker's Python stubs
// and METHODS.md are written by hand, so these tests hold them to the
// table: a method in one and not in another fails, in both directions, and
// so does an argument list or scope that differs.

// pythonStub is one system.* function of the worker: its namespace and
// name, its parameters (defaults dropped), the method it calls and the
// argument names it sends.
type pythonStub struct {
	params []string
	calls  []string
	sends  []string
}

var (
	pyNamespaceRe = regexp.MustCompile(`\("(\w+)", (_\w+)\)`)
	pyClassRe     = regexp.MustCompile(`(?m)^class (_\w+)\(_Namespace\):\n`)
	pyDefRe       = regexp.MustCompile(`(?m)^    def ([A-Za-z]\w*)\(self(?:, ([^)]*))?\):\n`)
	pyCallRe      = regexp.MustCompile(`self\._call\("([\w.]+)"`)
	pyKeyRe       = regexp.MustCompile(`"(\w+)":`)
)

// pythonStubs parses python/qubiq_worker.py: the namespaces of _System and
// the public functions of each namespace class, by "ns.name".
func pythonStubs(t *testing.T) map[string]pythonStub {
	t.Helper()
	b, err := os.ReadFile("python/qubiq_worker.py")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	nsOf := map[string]string{} // class → namespace
	for _, m := range pyNamespaceRe.FindAllStringSubmatch(src, -1) {
		nsOf[m[2]] = m[1]
	}
	out := map[string]pythonStub{}
	classes := pyClassRe.FindAllStringSubmatchIndex(src, -1)
	for i, c := range classes {
		class := src[c[2]:c[3]]
		end := len(src)
		if next := regexp.MustCompile(`(?m)^\S`).FindStringIndex(src[c[1]:]); next != nil {
			end = c[1] + next[0]
		}
		if i+1 < len(classes) && classes[i+1][0] < end {
			end = classes[i+1][0]
		}
		body := src[c[1]:end]
		ns, ok := nsOf[class]
		if !ok {
			t.Errorf("class %s is a namespace but _System does not hold it", class)
			continue
		}
		defs := pyDefRe.FindAllStringSubmatchIndex(body, -1)
		for j, d := range defs {
			name := body[d[2]:d[3]]
			var params []string
			if d[4] >= 0 {
				for _, p := range strings.Split(body[d[4]:d[5]], ",") {
					p, _, _ = strings.Cut(strings.TrimSpace(p), "=")
					params = append(params, strings.TrimSpace(p))
				}
			}
			fend := len(body)
			if j+1 < len(defs) {
				fend = defs[j+1][0]
			}
			fbody := body[d[1]:fend]
			st := pythonStub{params: params}
			for _, m := range pyCallRe.FindAllStringSubmatch(fbody, -1) {
				st.calls = append(st.calls, m[1])
			}
			for _, m := range pyKeyRe.FindAllStringSubmatch(fbody, -1) {
				st.sends = append(st.sends, m[1])
			}
			out[ns+"."+name] = st
		}
	}
	if len(out) == 0 {
		t.Fatal("no system.* function found in python/qubiq_worker.py: the parser no longer matches it")
	}
	return out
}

func TestMethods_PythonStubsMatchTheTable(t *testing.T) {
	stubs := pythonStubs(t)
	for _, m := range Methods() {
		st, ok := stubs[m.Name]
		if !ok {
			t.Errorf("%s is in the method table but the worker has no system.%s function (python/qubiq_worker.py)", m.Name, m.Name)
			continue
		}
		if !slices.Equal(st.params, m.Args) {
			t.Errorf("system.%s takes (%s) in Python; the table says (%s)", m.Name, strings.Join(st.params, ", "), strings.Join(m.Args, ", "))
		}
		if !slices.Equal(st.calls, []string{m.Name}) {
			t.Errorf("system.%s calls %v; want exactly %q", m.Name, st.calls, m.Name)
		}
		for _, k := range st.sends {
			if !slices.Contains(m.Args, k) {
				t.Errorf("system.%s sends argument %q, which the table's row lacks (%v)", m.Name, k, m.Args)
			}
		}
	}
	for name := range stubs {
		if _, ok := LookupMethod(name); !ok {
			t.Errorf("the worker has system.%s, which the method table lacks", name)
		}
	}
}

var (
	mdNameRe  = regexp.MustCompile("`([a-z]+\\.[A-Za-z]+)`")
	mdScopeRe = regexp.MustCompile("`([a-z]+:[a-z]+)`")
	mdArgRe   = regexp.MustCompile(`[{,]\s*"(\w+)"`) // a key, not a value such as "raw"
)

// methodsMD parses the table of METHODS.md's "## Methods" section: for each
// method its scope and the argument names of its params column.
func methodsMD(t *testing.T) (scopes map[string]string, args map[string][]string) {
	t.Helper()
	b, err := os.ReadFile("METHODS.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Methods\n")
	if !ok {
		t.Fatal(`METHODS.md has no "## Methods" section`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	scopes, args = map[string]string{}, map[string][]string{}
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(line), "|") {
			continue
		}
		names := mdNameRe.FindAllStringSubmatch(cells[1], -1)
		if len(names) == 0 {
			continue // the header and its separator
		}
		sc := mdScopeRe.FindStringSubmatch(cells[2])
		var as []string
		for _, m := range mdArgRe.FindAllStringSubmatch(cells[3], -1) {
			as = append(as, m[1])
		}
		for _, n := range names {
			if sc == nil {
				t.Errorf("METHODS.md row of %s names no scope", n[1])
				continue
			}
			scopes[n[1]], args[n[1]] = sc[1], as
		}
	}
	return scopes, args
}

func TestMethods_METHODSmdMatchesTheTable(t *testing.T) {
	scopes, args := methodsMD(t)
	for _, m := range Methods() {
		sc, ok := scopes[m.Name]
		if !ok {
			t.Errorf("%s is in the method table but not in METHODS.md", m.Name)
			continue
		}
		if sc != string(m.Scope) {
			t.Errorf("METHODS.md gives %s scope %q; the table %q", m.Name, sc, m.Scope)
		}
		got, want := slices.Clone(args[m.Name]), slices.Clone(m.Args)
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("METHODS.md gives %s the arguments %v; the table %v", m.Name, args[m.Name], m.Args)
		}
	}
	for name := range scopes {
		if _, ok := LookupMethod(name); !ok {
			t.Errorf("METHODS.md has %s, which the method table lacks", name)
		}
	}
}

func TestMethods_RowsAreWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range Methods() {
		if seen[m.Name] {
			t.Errorf("%s has two rows", m.Name)
		}
		seen[m.Name] = true
		ns, _, _ := strings.Cut(m.Name, ".")
		if _, ok := namespaceScopes[ns]; !ok {
			t.Errorf("%s: namespace %q has no fail-safe scope", m.Name, ns)
		}
		for alias, name := range m.Aliases {
			if !slices.Contains(m.Args, name) || slices.Contains(m.Args, alias) {
				t.Errorf("%s: alias %q → %q does not name an argument", m.Name, alias, name)
			}
		}
	}
}

func TestMethod_ParseArgs(t *testing.T) {
	m, _ := LookupMethod("db.beginTransaction")
	a, err := m.ParseArgs([]byte(`{"database":"pg","timeout_ms":500,"isolation":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if db, _ := a.String("database", true); db != "pg" {
		t.Errorf("database %q", db)
	}
	if ms, _ := a.Int("timeoutMs", 1); ms != 500 {
		t.Errorf("alias timeout_ms not taken: %d", ms)
	}
	if a.Has("isolation") {
		t.Error("null counts as given")
	}
	if _, err := m.ParseArgs([]byte(`{"ttl":3}`)); !errors.Is(err, ErrBadArgs) || !strings.Contains(err.Error(), `unknown argument "ttl" (takes database, isolation, timeoutMs)`) {
		t.Errorf("unknown argument: %v", err)
	}
	if _, err := m.ParseArgs([]byte(`[1]`)); !errors.Is(err, ErrBadArgs) {
		t.Errorf("a list: %v", err)
	}
	if a, err := m.ParseArgs(nil); err != nil || a.Has("database") {
		t.Errorf("no arguments: %v", err)
	}
	f, _ := LookupMethod("files.save")
	a, _ = f.ParseArgs([]byte(`{"path":"p","data":{"$bytes":"AAE="}}`))
	if b, err := a.Data("data"); err != nil || string(b) != "\x00\x01" {
		t.Errorf("data %q %v", b, err)
	}
	h, _ := LookupMethod("hist.getTrends")
	a, _ = h.ParseArgs([]byte(`{"start":{"$dt":"2025-03-01T12:00:00Z"},"end":1740830400000}`))
	if s, err := a.Time("start"); err != nil || s.Unix() != 1740830400 {
		t.Errorf("start %v %v", s, err)
	}
	if e, err := a.Time("end"); err != nil || e.Unix() != 1740830400 {
		t.Errorf("end %v %v", e, err)
	}
}
