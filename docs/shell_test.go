package docs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// checkShell checks each qubiqctl command line of a shell example: the
// command must exist and take the flags the line gives it, which
// `qubiqctl WORDS... --help` proves (it parses the flags, prints the
// command's help and exits 0, without calling the daemon).
func checkShell(t *testing.T, _ string, f fence, _ map[string]string) outcome {
	var errs []string
	for _, line := range shellLines(f.body) {
		for _, args := range qubiqctlCalls(line) {
			if err := runHelp(t, args); err != nil {
				errs = append(errs, fmt.Sprintf("%q: %v", line, err))
			}
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	return nil
}

// shellLines returns the logical lines of a shell text: backslash
// continuations joined, comments and blank lines dropped.
func shellLines(body string) []string {
	var out []string
	var cur strings.Builder
	for l := range strings.Lines(body) {
		l = strings.TrimRight(l, "\n")
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\"))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(l)
		s := strings.TrimSpace(cur.String())
		cur.Reset()
		if s != "" && !strings.HasPrefix(s, "#") {
			out = append(out, s)
		}
	}
	return out
}

// qubiqctlRe finds where a qubiqctl invocation starts: the word qubiqctl,
// possibly with a directory (bin/qubiqctl).
var qubiqctlRe = regexp.MustCompile(`(^|[\s;|&(])(?:[\w./-]*/)?qubiqctl(\s|$)`)

// qubiqctlCalls returns the arguments of each qubiqctl invocation of a
// line, up to the end of its simple command (a pipe, a redirection, ;, &&,
// ||, a closing parenthesis or a comment).
func qubiqctlCalls(line string) [][]string {
	var out [][]string
	for _, m := range qubiqctlRe.FindAllStringSubmatchIndex(line, -1) {
		out = append(out, words(line[m[1]:]))
	}
	return out
}

// words splits shell text into words with single and double quotes and
// backslashes, stopping at an unquoted operator or comment. A word made by
// a command substitution or variable is kept as written.
func words(s string) []string {
	var out []string
	var w strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			out = append(out, w.String())
		}
		w.Reset()
		inWord = false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				j = len(s) - i - 1
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				j = len(s) - i - 1
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '\\' && i+1 < len(s):
			w.WriteByte(s[i+1])
			i++
			inWord = true
		case c == ' ' || c == '\t':
			flush()
		case c == '|' || c == ';' || c == '&' || c == '<' || c == '>' || c == ')' || (c == '#' && !inWord):
			flush()
			if c == '>' && len(out) > 0 && out[len(out)-1] == "2" {
				out = out[:len(out)-1] // 2>file
			}
			return out
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return out
}

// runHelp runs qubiqctl ARGS... --help with no daemon to talk to.
func runHelp(t *testing.T, args []string) error {
	cmd := exec.Command(filepath.Join(bins(t), "qubiqctl"), append(args, "--help")...)
	cmd.Env = append(cleanEnv(), "QUBIQ_URL=http://127.0.0.1:1")
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("qubiqctl %s --help: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// TestShellWords checks the shell splitting the qubiqctl line check uses.
func TestShellWords(t *testing.T) {
	tests := []struct {
		line string
		want [][]string
	}{
		{`bin/qubiqctl tags read Line1/Pump/Speed   # a comment`, [][]string{{"tags", "read", "Line1/Pump/Speed"}}},
		{`qubiqctl scripts run pumps.set_speed --args '{"rpm": 1200}'`, [][]string{{"scripts", "run", "pumps.set_speed", "--args", `{"rpm": 1200}`}}},
		{`K=$(qubiqctl --json apikeys create --name x --write-level view | jq -r .token)`, [][]string{{"--json", "apikeys", "create", "--name", "x", "--write-level", "view"}}},
		{`qubiqctl users add --name eng --password-file - < eng.pw && qubiqctl users list`, [][]string{{"users", "add", "--name", "eng", "--password-file", "-"}, {"users", "list"}}},
		{`source <(qubiqctl completion bash)`, [][]string{{"completion", "bash"}}},
		{`qubiqctl tags export -o tags.csv 2>/dev/null`, [][]string{{"tags", "export", "-o", "tags.csv"}}},
		{`echo qubiqctlx status`, nil},
	}
	for _, tt := range tests {
		got := qubiqctlCalls(tt.line)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s:\n got %q\nwant %q", tt.line, got, tt.want)
		}
	}
	if got := shellLines("a \\\n  b\n# c\n\nd\n"); fmt.Sprint(got) != "[a    b d]" {
		t.Errorf("shellLines = %q", got)
	}
}

// TestLinks checks the pages' relative links: each names a file of the
// repository, and every reference page is linked from the README and from
// docs/README.md.
func TestLinks(t *testing.T) {
	root := repoRoot(t)
	linkRe := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	linked := map[string]map[string]bool{}
	for _, p := range pages(t, root) {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		linked[p] = map[string]bool{}
		for _, m := range linkRe.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			abs := filepath.Join(root, filepath.Dir(p), target)
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s: link (%s) names no file", p, m[1])
				continue
			}
			rel, _ := filepath.Rel(root, abs)
			linked[p][rel] = true
		}
	}
	for _, p := range pages(t, root) {
		if !strings.HasPrefix(p, "docs/") || p == "docs/README.md" {
			continue
		}
		for _, index := range []string{"README.md", "docs/README.md"} {
			if !linked[index][p] {
				t.Errorf("%s is not linked from %s", p, index)
			}
		}
	}
}
