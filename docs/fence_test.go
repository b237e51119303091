package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// fence is one fenced code block of a Markdown page.
type fence struct {
	file  string // the page, relative to the repository root ("docs/modbus.md")
	line  int    // line of the opening fence, 1-based
	lang  string // first word of the info string ("yaml")
	flags map[string]bool
	attrs map[string]string
	body  string
}

// name is how subtests and failures name the example: "docs/modbus.md:120".
func (f fence) name() string { return fmt.Sprintf("%s:%d", f.file, f.line) }

// bad reports whether the example must fail its check.
func (f fence) bad() bool { return f.flags["bad"] }

// fragment reports whether the example is a piece, not a whole document.
func (f fence) fragment() bool { return f.flags["fragment"] }

// parseFences returns the fenced code blocks of a Markdown text (CommonMark
// backtick or tilde fences of 3 or more, possibly indented, as inside list
// items): the indentation of the opening fence is removed from the body's
// lines. An unclosed fence is an error naming its line.
func parseFences(file, text string) ([]fence, error) {
	var out []fence
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	var cur *fence
	var marker, indent string
	var body strings.Builder
	for sc.Scan() {
		n++
		l := sc.Text()
		trimmed := strings.TrimLeft(l, " ")
		if cur == nil {
			m := fenceMarker(trimmed)
			if m == "" || len(l)-len(trimmed) > 3 {
				continue
			}
			f, err := parseInfo(strings.TrimSpace(trimmed[len(m):]))
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", file, n, err)
			}
			f.file, f.line = file, n
			cur, marker, indent = &f, m, l[:len(l)-len(trimmed)]
			body.Reset()
			continue
		}
		if strings.HasPrefix(trimmed, marker) && strings.TrimSpace(strings.TrimLeft(trimmed, marker[:1])) == "" {
			cur.body = body.String()
			out = append(out, *cur)
			cur = nil
			continue
		}
		body.WriteString(strings.TrimPrefix(l, indent))
		body.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: fence not closed", file, cur.line)
	}
	return out, nil
}

// fenceMarker returns the fence run (``` or ~~~, or longer) that l starts
// with, or "".
func fenceMarker(l string) string {
	for _, c := range []byte{'`', '~'} {
		i := 0
		for i < len(l) && l[i] == c {
			i++
		}
		if i >= 3 {
			return l[:i]
		}
	}
	return ""
}

// parseInfo parses an info string: the language, then words (flags) and
// key="value", key='value' or key=value attributes (no escapes: a value
// holding " is written in single quotes).
func parseInfo(info string) (fence, error) {
	f := fence{flags: map[string]bool{}, attrs: map[string]string{}}
	i := 0
	word := func() (string, error) {
		start := i
		for i < len(info) && info[i] != ' ' && info[i] != '=' {
			i++
		}
		w := info[start:i]
		if i < len(info) && info[i] == '=' {
			i++
			var v string
			if i < len(info) && (info[i] == '"' || info[i] == '\'') {
				end := strings.IndexByte(info[i+1:], info[i])
				if end < 0 {
					return "", fmt.Errorf("info string %q: unclosed quote", info)
				}
				v = info[i+1 : i+1+end]
				i += end + 2
			} else {
				s := i
				for i < len(info) && info[i] != ' ' {
					i++
				}
				v = info[s:i]
			}
			f.attrs[w] = v
			return "", nil
		}
		return w, nil
	}
	first := true
	for i < len(info) {
		if info[i] == ' ' {
			i++
			continue
		}
		w, err := word()
		if err != nil {
			return f, err
		}
		switch {
		case w == "":
		case first:
			f.lang = w
		default:
			f.flags[w] = true
		}
		first = false
	}
	for k := range f.flags {
		switch k {
		case "bad", "fragment":
		default:
			return f, fmt.Errorf("info string %q: unknown word %q (want bad, fragment, want=\"...\", file=...)", info, k)
		}
	}
	for k := range f.attrs {
		switch k {
		case "want", "file":
		default:
			return f, fmt.Errorf("info string %q: unknown attribute %q (want want=\"...\" or file=...)", info, k)
		}
	}
	return f, nil
}

// pages returns the Markdown pages whose examples are checked: docs/*.md
// and the README, relative to root, sorted.
func pages(t *testing.T, root string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, p := range m {
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel)
	}
	sort.Strings(out[1:])
	return out
}

// allFences reads every page's fences.
func allFences(t *testing.T, root string) []fence {
	t.Helper()
	var out []fence
	for _, p := range pages(t, root) {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		fs, err := parseFences(p, string(b))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fs...)
	}
	return out
}

// TestParseFences checks the extractor on a page with every shape of
// fence: language and flags, attributes, an indented fence inside a list
// item, a longer fence holding a shorter one, and a tilde fence.
func TestParseFences(t *testing.T) {
	page := "text\n" +
		"```yaml\n" +
		"a: 1\n" +
		"```\n" +
		"- item\n" +
		"\n" +
		"  ```python bad want='forbidden \"attribute\"' file=scripts/x.py\n" +
		"  def f(args):\n" +
		"      return args.__class__\n" +
		"  ```\n" +
		"````text\n" +
		"```\n" +
		"````\n" +
		"~~~sh fragment\n" +
		"qubiqctl status\n" +
		"~~~\n"
	fs, err := parseFences("p.md", page)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 4 {
		t.Fatalf("%d fences, want 4: %+v", len(fs), fs)
	}
	if f := fs[0]; f.lang != "yaml" || f.line != 2 || f.body != "a: 1\n" || f.bad() || f.fragment() {
		t.Errorf("fence 1 = %+v", f)
	}
	if f := fs[1]; f.lang != "python" || f.line != 7 || !f.bad() || f.attrs["want"] != `forbidden "attribute"` ||
		f.attrs["file"] != "scripts/x.py" || f.body != "def f(args):\n    return args.__class__\n" {
		t.Errorf("fence 2 = %+v", f)
	}
	if f := fs[2]; f.lang != "text" || f.body != "```\n" {
		t.Errorf("fence 3 = %+v", f)
	}
	if f := fs[3]; f.lang != "sh" || !f.fragment() || f.body != "qubiqctl status\n" {
		t.Errorf("fence 4 = %+v", f)
	}
	if _, err := parseFences("p.md", "```yaml\na: 1\n"); err == nil || !strings.Contains(err.Error(), "p.md:1: fence not closed") {
		t.Errorf("unclosed fence: err = %v", err)
	}
	if _, err := parseFences("p.md", "```yaml wrong\n```\n"); err == nil || !strings.Contains(err.Error(), `unknown word "wrong"`) {
		t.Errorf("unknown flag: err = %v", err)
	}
}
