package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestHelp_EveryCommand: `qubiqctl help CMD` and `qubiqctl CMD --help`
// (and -h) print the same help of every command on stdout, starting with
// its usage line and listing each of its own flags, and exit 0 without
// calling a daemon.
func TestHelp_EveryCommand(t *testing.T) {
	clearEnv(t)
	t.Setenv("QUBIQ_URL", "http://127.0.0.1:1") // nothing listens: help must not call it
	for name, c := range commands {
		if c.hidden {
			continue
		}
		t.Run(name, func(t *testing.T) {
			words := strings.Fields(name)
			code, viaHelp, errOut := runCLI(append([]string{"help"}, words...)...)
			if code != 0 || errOut != "" {
				t.Fatalf("help %s: exit %d stderr %q", name, code, errOut)
			}
			if !strings.HasPrefix(viaHelp, "usage: "+c.usageLine()+"\n\n") {
				t.Errorf("help %s starts %q, want the usage line %q", name, firstLines(viaHelp, 1), c.usageLine())
			}
			for _, f := range commandFlags(c) {
				if !strings.Contains(viaHelp, flagSyntax(f)) {
					t.Errorf("help %s does not list its flag %s", name, flagSyntax(f))
				}
			}
			for _, h := range []string{"--help", "-h"} {
				code, out, errOut := runCLI(append(words, h)...)
				if code != 0 || errOut != "" || out != viaHelp {
					t.Errorf("%s %s: exit %d stderr %q; stdout differs from help %s:\n%s", name, h, code, errOut, name, out)
				}
			}
		})
	}
}

// TestHelp_Groups: a group's help lists its subcommands, each with its
// usage line; `GROUP --help` prints the same.
func TestHelp_Groups(t *testing.T) {
	clearEnv(t)
	for _, g := range []string{"tags", "devices", "devices certs", "scripts", "project", "packages", "apikeys", "users"} {
		words := strings.Fields(g)
		code, out, _ := runCLI(append([]string{"help"}, words...)...)
		if code != 0 {
			t.Fatalf("help %s: exit %d", g, code)
		}
		for _, c := range sortedCommands(g) {
			// the usage line, and the summary's start indented on the next line
			want := "  " + c.usageLine() + "\n      " + strings.Fields(summary(c.help))[0] + " "
			if !strings.Contains(out, want) {
				t.Errorf("help %s lacks %q:\n%s", g, want, out)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "      ") && len(line) > 80 {
				t.Errorf("help %s: summary line of %d columns: %q", g, len(line), line)
			}
		}
		if code, out2, _ := runCLI(append(words, "--help")...); code != 0 || out2 != out {
			t.Errorf("%s --help: exit %d, output differs from help %s", g, code, g)
		}
	}
}

// TestHelp_Full: `qubiqctl help`, -h and --help list every visible
// command, in commandOrder, and commandOrder names every command.
func TestHelp_Full(t *testing.T) {
	clearEnv(t)
	for name, c := range commands {
		if !c.hidden && !slices.Contains(commandOrder, name) {
			t.Errorf("command %q is missing from commandOrder", name)
		}
	}
	code, out, _ := runCLI("help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	last := -1
	for _, name := range commandOrder {
		i := strings.Index(out, "\n  "+name+" ")
		if i < 0 {
			t.Errorf("help does not list %q", name)
			continue
		}
		if i < last {
			t.Errorf("help lists %q out of order", name)
		}
		last = i
	}
	if strings.Contains(out, "__complete") {
		t.Error("help lists the hidden __complete")
	}
	for _, a := range [][]string{{"-h"}, {"--help"}} {
		if code, o, _ := runCLI(a...); code != 0 || o != out {
			t.Errorf("%v: exit %d, output differs from help", a, code)
		}
	}
}

// TestUsageError_OneLine: a usage error prints the error, the one usage
// line of the command (or group, or the top level) it concerns and where
// to read more — three lines on stderr, never the command list.
func TestUsageError_OneLine(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		args      []string
		wantUsage string
	}{
		{[]string{"tags", "read"}, "usage: qubiqctl tags read PATH|FOLDER|PATTERN... | --all"},
		{[]string{"tags", "read", "--all", "X"}, "usage: qubiqctl tags read PATH|FOLDER|PATTERN... | --all"},
		{[]string{"tags", "watch", "--lines", "--redraw", "X"}, "usage: qubiqctl tags watch [--lines|--redraw] [--for D] PATH|FOLDER|PATTERN... | --all"},
		{[]string{"scripts", "run", "pumps"}, "usage: qubiqctl scripts run MODULE.ENTRY [--args JSON]"},
		{[]string{"apikeys", "create", "--frob"}, "usage: qubiqctl apikeys create --name N"},
		{[]string{"users", "add"}, "usage: qubiqctl users add --name N"},
		{[]string{"tags"}, "usage: qubiqctl tags list|read|watch|write|import|export ..."},
		{[]string{"devices", "frob"}, "usage: qubiqctl devices list|show|plan|browse|certs ..."},
		{[]string{"frob"}, "usage: " + topUsage},
		{[]string{}, "usage: " + topUsage},
		{[]string{"--frob"}, "usage: " + topUsage},
		{[]string{"help", "frob"}, "usage: " + topUsage},
		{[]string{"completion", "fish"}, "usage: qubiqctl completion bash|zsh"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(tt.args...)
			if code != exitUsage || out != "" {
				t.Fatalf("exit %d stdout %q, want 2 and nothing", code, out)
			}
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			if len(lines) != 3 || !strings.HasPrefix(lines[0], "qubiqctl: ") || !strings.HasPrefix(lines[1], tt.wantUsage) ||
				!strings.HasPrefix(lines[2], "Run 'qubiqctl help") {
				t.Errorf("stderr:\n%s\nwant the error, %q..., and the help hint", errOut, tt.wantUsage)
			}
		})
	}
}

func firstLines(s string, n int) string {
	ls := strings.SplitN(s, "\n", n+1)
	return strings.Join(ls[:min(n, len(ls))], "\n")
}

// TestHelp_APIKeyScopes: help apikeys create names every scope and
// permission of the tables under docs/security.md's "Scopes" and
// "Permissions", so nobody has to guess them.
func TestHelp_APIKeyScopes(t *testing.T) {
	clearEnv(t)
	page, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI("help", "apikeys", "create")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	row := regexp.MustCompile("^\\| `([a-z_:]+)` \\|")
	counts := map[string]int{}
	section := ""
	for _, line := range strings.Split(string(page), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = h
			continue
		}
		if section != "Scopes" && section != "Permissions" {
			continue
		}
		if m := row.FindStringSubmatch(line); m != nil {
			counts[section]++
			if !strings.Contains(out, m[1]) {
				t.Errorf("help apikeys create lacks %q (docs/security.md, %s)", m[1], section)
			}
		}
	}
	if counts["Scopes"] == 0 || counts["Permissions"] == 0 {
		t.Errorf("docs/security.md: found %v rows, want the tables of Scopes and Permissions", counts)
	}
}

// TestHelp_ProseWrapped: the prose of every command's help (its summary
// and its longer text, between the usage line and the flags) is wrapped
// to 80 columns, so it reads in a terminal without the line breaking
// mid-word.
func TestHelp_ProseWrapped(t *testing.T) {
	clearEnv(t)
	for name, c := range commands {
		if c.hidden {
			continue
		}
		_, out, _ := runCLI(append([]string{"help"}, strings.Fields(name)...)...)
		prose, _, _ := strings.Cut(out, "\nflags:\n")
		prose, _, _ = strings.Cut(prose, "\nglobal flags")
		lines := strings.Split(prose, "\n")
		for _, l := range lines[1:] { // lines[0] is the usage line
			if len(l) > 80 {
				t.Errorf("help %s: a line of %d columns: %q", name, len(l), l)
			}
		}
	}
}
