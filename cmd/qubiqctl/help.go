package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// The help of qubiqctl: `qubiqctl help` lists every command, `qubiqctl
// help CMD` and `qubiqctl CMD --help` show one command (its usage line,
// what it does, its flags) or one group (its subcommands), and a usage
// error prints only the usage line of the command it concerns
// (docs/qubiqctl.md).

// commandOrder is the order commands are listed in; commands missing from
// it are listed after, sorted (help_test.go checks that none is missing).
var commandOrder = []string{
	"status",
	"tags list", "tags read", "tags watch", "tags write", "tags import", "tags export",
	"devices list", "devices show", "devices plan", "devices browse",
	"devices certs list", "devices certs trust", "devices certs reject",
	"scripts push", "scripts run", "scripts lint", "scripts list",
	"flows list", "flows show", "flows reset", "flows push", "flows versions", "flows rollback", "flows delete",
	"alarms list", "alarms ack", "alarms shelve", "alarms unshelve", "alarms note", "alarms journal", "alarms stats",
	"project import", "project export",
	"packages list", "packages install", "packages upload", "packages remove", "packages check",
	"apikeys create", "apikeys list", "apikeys revoke",
	"users add", "users passwd", "users disable", "users list",
	"mqtt keygen", "mqtt sign", "firmware keygen", "firmware sign",
	"audit", "provision", "flash", "backup", "restore", "log-level", "completion", "help",
}

// sortedCommands returns the visible commands whose name is prefix or
// starts with prefix + " " ("" for all), in commandOrder.
func sortedCommands(prefix string) []command {
	var out []command
	for n, c := range commands {
		if c.hidden || (prefix != "" && n != prefix && !strings.HasPrefix(n, prefix+" ")) {
			continue
		}
		out = append(out, c)
	}
	rank := func(n string) int {
		if i := slices.Index(commandOrder, n); i >= 0 {
			return i
		}
		return len(commandOrder)
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := rank(out[i].name), rank(out[j].name)
		if ri != rj {
			return ri < rj
		}
		return out[i].name < out[j].name
	})
	return out
}

// subcommands returns the next words after group of the visible commands
// under it ("tags" → list, read, ...; "devices certs" → list, trust,
// reject), in listing order, or nil when group is not a group.
func subcommands(group string) []string {
	var out []string
	for _, c := range sortedCommands(group) {
		if c.name == group {
			continue
		}
		w := strings.Fields(strings.TrimPrefix(c.name, group+" "))[0]
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// usageLine is "qubiqctl NAME ARGS" of a command.
func (c command) usageLine() string {
	return strings.TrimSpace("qubiqctl " + c.name + " " + c.args)
}

const topUsage = "qubiqctl [--url URL] [--api-key KEY] [--json] [--timeout D] [--tls-fingerprint SHA256] COMMAND [ARGS]"

// printUsageLine prints the usage of name (a command, a group, or "" for
// the top level) as one line, and where its help is, after a usage error.
func printUsageLine(w io.Writer, name string) {
	if c, ok := commands[name]; ok {
		fmt.Fprintf(w, "usage: %s\nRun 'qubiqctl help %s' for its flags and details.\n", c.usageLine(), name)
		return
	}
	if subs := subcommands(name); name != "" && len(subs) > 0 {
		fmt.Fprintf(w, "usage: qubiqctl %s %s ...\nRun 'qubiqctl help %s' for its subcommands.\n", name, strings.Join(subs, "|"), name)
		return
	}
	fmt.Fprintf(w, "usage: %s\nRun 'qubiqctl help' for the commands.\n", topUsage)
}

// helpFor answers `qubiqctl help WORDS...`: the help of the command or
// group they name, or a usage error for words that name neither.
func helpFor(words []string) error {
	if len(words) == 0 {
		return &helpRequest{}
	}
	if words[0] == "-h" || words[0] == "--help" || words[0] == "-help" {
		return &helpRequest{cmd: "help"}
	}
	for n := min(3, len(words)); n >= 1; n-- {
		name := strings.Join(words[:n], " ")
		if c, ok := commands[name]; ok && !c.hidden {
			return &helpRequest{cmd: name}
		}
	}
	for n := min(2, len(words)); n >= 1; n-- {
		if g := strings.Join(words[:n], " "); len(subcommands(g)) > 0 {
			if len(words) > n {
				return &usageError{msg: fmt.Sprintf("help: unknown subcommand %q (%s has: %s)",
					strings.Join(words[:n+1], " "), g, strings.Join(subcommands(g), ", ")), cmd: g}
			}
			return &helpRequest{cmd: g}
		}
	}
	return &usageError{msg: fmt.Sprintf("help: unknown command %q", strings.Join(words, " "))}
}

// printHelp prints the help of name: the whole list for "", a group's
// subcommands, or one command.
func printHelp(w io.Writer, name string) error {
	if name == "" {
		return printFullHelp(w)
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(w, "usage: qubiqctl %s %s ...\n\n", name, strings.Join(subcommands(name), "|"))
		// Each subcommand's usage line, then its summary indented below it:
		// a table would push every summary past the longest usage line
		// (tags import's is 150 columns).
		for _, sc := range sortedCommands(name) {
			fmt.Fprintf(w, "  %s\n      %s\n", sc.usageLine(), strings.ReplaceAll(wrap(summary(sc.help), 72), "\n", "\n      "))
		}
		_, err := fmt.Fprintf(w, "\nRun 'qubiqctl help %s SUBCOMMAND' for its flags and details.\n", name)
		return err
	}
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usageLine(), wrap(c.help, 78))
	if c.long != "" {
		fmt.Fprintf(w, "\n%s\n", wrapLong(strings.TrimRight(c.long, "\n"), 78))
	}
	if fl := commandFlags(c); len(fl) > 0 {
		fmt.Fprint(w, "\nflags:\n")
		t := newTable(w)
		for _, f := range fl {
			t.row("  "+flagSyntax(f), flagHelp(f))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if !c.local {
		fmt.Fprint(w, "\nglobal flags (before or after the command): --url, --api-key, --json, --timeout, --tls-fingerprint;\nsee 'qubiqctl help'.\n")
	}
	return nil
}

// printFullHelp is `qubiqctl help`: the global flags and every command
// with its one-line help.
func printFullHelp(w io.Writer) error {
	fmt.Fprintf(w, `usage: %s

Talks to a running qubiqd over its REST API (reference: docs/qubiqctl.md).

global flags (also accepted after COMMAND):
  --url URL        daemon URL (env QUBIQ_URL; default %s)
  --api-key KEY    API key (env QUBIQ_API_KEY)
  --json           print the API's JSON instead of a table
  --timeout D      timeout of each request (default 30s; scripts run and packages: 10m30s)
  --tls-fingerprint SHA256
                   trust the daemon's self-signed certificate with this
                   fingerprint (env QUBIQ_TLS_FINGERPRINT; see status or the log)
  --version        print qubiqctl's version and exit (before COMMAND)

commands:
`, topUsage, defaultURL)
	t := newTable(w)
	for _, c := range sortedCommands("") {
		t.row("  "+c.name, summary(c.help))
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprint(w, "\nRun 'qubiqctl help COMMAND' (or 'qubiqctl COMMAND --help') for its arguments and flags.\n"+
		"Shell completion: source <(qubiqctl completion bash), or completion zsh.\n"+
		"exit codes: 0 ok, 1 error, 2 usage\n")
	return err
}

// globalFlagNames are the flags every command takes (globals.register).
var globalFlagNames = func() map[string]bool {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	var g globals
	g.register(fs)
	out := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { out[f.Name] = true })
	return out
}()

// commandFlags returns the command's own flags (not the global ones),
// sorted by name.
func commandFlags(c command) []*flag.Flag {
	if c.flags == nil {
		return nil
	}
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	var o opts
	c.flags(fs, &o)
	var out []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !globalFlagNames[f.Name] {
			out = append(out, f)
		}
	})
	return out
}

// flagSyntax is "--name VALUE" (or "-o FILE" for one-letter flags); the
// value's name comes from backquotes in the usage, as flag.UnquoteUsage
// reads it.
func flagSyntax(f *flag.Flag) string {
	dash := "--"
	if len(f.Name) == 1 {
		dash = "-"
	}
	name, _ := flag.UnquoteUsage(f)
	if name == "" {
		return dash + f.Name
	}
	if v, ok := flagValueNames[f.Name]; ok && !strings.Contains(f.Usage, "`") {
		return dash + f.Name + " " + v
	}
	return dash + f.Name + " " + strings.ToUpper(name)
}

// flagValueNames name the value of flags whose usage does not (instead of
// flag's "string", "int").
var flagValueNames = map[string]string{
	"format": "csv|yaml", "browse": "DEVICE", "root": "NODE", "prefix": "FOLDER/SUB", "scan": "DURATION",
	"depth": "N", "o": "FILE", "args": "JSON", "after": "SEQ", "limit": "N", "expires": "RFC3339",
	"name": "NAME", "permissions": "p,q", "prefixes": "P,Q", "scopes": "a,b", "write-level": "LEVEL",
	"level": "LEVEL", "password-file": "FILE", "realm": "platform|operator",
}

// flagHelp is the usage text of f, with its default when it has one.
func flagHelp(f *flag.Flag) string {
	_, usage := flag.UnquoteUsage(f)
	switch f.DefValue {
	case "", "false", "0", "0s":
		return usage
	}
	return fmt.Sprintf("%s (default %s)", usage, f.DefValue)
}

// summary is the first clause of a command's help, for listings: up to
// the first ". ", ": " or "; " outside parentheses.
func summary(s string) string {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case c == '\n', depth == 0 && (c == '.' || c == ':' || c == ';') && i+1 < len(s) && s[i+1] == ' ':
			return s[:i]
		}
	}
	return strings.TrimSuffix(s, ".")
}

// wrapLong wraps each line of a command's longer text that is wider than
// width, keeping the lines of a text already laid out (lists, tables).
func wrapLong(text string, width int) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if len(l) > width {
			lines[i] = wrap(l, width)
		}
	}
	return strings.Join(lines, "\n")
}

// wrap breaks text into lines of at most width columns at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(text) {
		if n > 0 && n+1+len(w) > width {
			b.WriteByte('\n')
			n = 0
		} else if n > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}
