// Command qubiqctl is the technician CLI of QUBIQ Edge: it talks HTTP(S) to
// a running qubiqd through package client only (docs/qubiqctl.md, the
// command reference).
//
// Global flags (before or after the subcommand): --url (QUBIQ_URL, default
// http://127.0.0.1:8080), --api-key (QUBIQ_API_KEY), --json (print the
// API's JSON instead of a table), --timeout (per request, default 30s;
// scripts run defaults to 10m30s), --tls-fingerprint
// (QUBIQ_TLS_FINGERPRINT). Exit codes: 0 ok, 1 error (the problem's detail
// on stderr), 2 usage (the one usage line of the command concerned).
// `qubiqctl help [COMMAND]` and `qubiqctl COMMAND --help` print help;
// `qubiqctl completion bash|zsh` prints a shell completion script.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/client"
)

// Defaults of the global flags (docs/qubiqctl.md, "Global flags").
const (
	defaultURL        = "http://127.0.0.1:8080"
	defaultTimeout    = 30 * time.Second
	defaultRunTimeout = 10*time.Minute + 30*time.Second // python.gateway_timeout max + margin
)

// version is qubiqctl's version, set at build time with
// -ldflags "-X main.version=..." (Makefile, VERSION); `qubiqctl --version`
// prints it.
var version = "0.1.0-dev"

// Exit codes (docs/qubiqctl.md, "Exit codes").
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// globals are the flags every subcommand accepts.
type globals struct {
	url        string
	apiKey     string
	json       bool
	timeout    time.Duration
	timeoutSet bool
	// tlsPin is the SHA-256 fingerprint the daemon's certificate must have
	// (--tls-fingerprint, QUBIQ_TLS_FINGERPRINT): for a self-signed
	// certificate (http.tls: auto), instead of a CA.
	tlsPin string
}

// register adds the global flags to fs, bound to g, with g's current values
// as defaults (so a flag set before the subcommand survives its parse).
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.url, "url", g.url, "daemon URL (env QUBIQ_URL)")
	fs.StringVar(&g.apiKey, "api-key", g.apiKey, "API key sent as Bearer credential (env QUBIQ_API_KEY)")
	fs.BoolVar(&g.json, "json", g.json, "print the API's JSON instead of a table")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "timeout of each request")
	fs.StringVar(&g.tlsPin, "tls-fingerprint", g.tlsPin, "SHA-256 fingerprint of the daemon's self-signed certificate (env QUBIQ_TLS_FINGERPRINT)")
}

// cli is one invocation: its flags, output streams and, once the flags are
// parsed, its client.
type cli struct {
	g              globals
	stdout, stderr io.Writer
	c              *client.Client
}

// usageError is a wrong invocation: run prints it, the one usage line of
// the command it concerns and where to read more, and exits 2.
type usageError struct {
	msg string
	// cmd is the command (or command group, "tags") the error concerns;
	// "" is the top level. run fills it in for errors of a command.
	cmd string
}

// Error returns the message.
func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// helpRequest is -h, --help or help asked for a command or group (cmd; ""
// for the top level): run prints its help on stdout and exits 0.
type helpRequest struct{ cmd string }

// Error says what was asked.
func (h *helpRequest) Error() string { return "help for " + h.cmd }

// command is one subcommand: "status", "tags read", "devices certs trust".
type command struct {
	name  string // "tags read"
	args  string // usage of its positional arguments and flags
	help  string // one line (or a few) shown in listings
	long  string // more paragraphs, shown by qubiqctl help CMD
	flags func(fs *flag.FlagSet, o *opts)
	run   func(ctx context.Context, c *cli, o *opts, args []string) error
	// defaultTimeout, when set, replaces defaultTimeout if --timeout is
	// not given.
	defaultTimeout time.Duration
	// local commands need no daemon (help, completion).
	local bool
	// hidden commands are not listed (the completion helper).
	hidden bool
	// complete, when set, returns candidates for a positional argument
	// (tag paths, device names), asking the daemon; nil candidates let the
	// shell complete file names.
	complete func(ctx context.Context, c *cli, pos []string, word string) []string
}

// opts holds the subcommand-specific flags of every command.
type opts struct {
	args                                 string
	name, scopes, level, perms, prefixes string
	expires                              string
	passwordFile                         string
	realm                                string
	force, keepCredentials               bool   // flash, restore
	output                               string // backup -o
	// mqtt keygen / sign
	mqttKey, mqttKeyID, mqttTopic, mqttBody, mqttID, mqttTS, mqttOut string
	// firmware keygen / sign
	fwKey, fwOut string
}

// run is qubiqctl: it parses args, calls the subcommand, prints its answer
// to stdout and any error to stderr, and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	c.g = globals{url: envOr("QUBIQ_URL", defaultURL), apiKey: os.Getenv("QUBIQ_API_KEY"), timeout: defaultTimeout,
		tlsPin: os.Getenv("QUBIQ_TLS_FINGERPRINT")}

	fs := flag.NewFlagSet("qubiqctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.g.register(fs)
	showVersion := fs.Bool("version", false, "print qubiqctl's version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c.report(&helpRequest{})
		}
		return c.report(&usageError{msg: flagError(fs, err)})
	}
	rest := fs.Args()
	if *showVersion {
		fmt.Fprintln(stdout, "qubiqctl", version)
		return exitOK
	}
	if len(rest) == 0 {
		return c.report(usagef("missing command"))
	}
	if rest[0] == "help" {
		return c.report(helpFor(rest[1:]))
	}
	cmd, rest, err := lookup(rest)
	if err != nil {
		return c.report(err)
	}

	var o opts
	sfs := flag.NewFlagSet("qubiqctl "+cmd.name, flag.ContinueOnError)
	sfs.SetOutput(io.Discard)
	c.g.register(sfs)
	if cmd.flags != nil {
		cmd.flags(sfs, &o)
	}
	pos, err := parseInterspersed(sfs, rest)
	if errors.Is(err, flag.ErrHelp) {
		return c.report(&helpRequest{cmd: cmd.name})
	}
	if err != nil {
		return c.report(&usageError{msg: fmt.Sprintf("%s: %s", cmd.name, flagError(sfs, err)), cmd: cmd.name})
	}
	for _, f := range []*flag.FlagSet{fs, sfs} {
		f.Visit(func(f *flag.Flag) { c.g.timeoutSet = c.g.timeoutSet || f.Name == "timeout" })
	}
	if !c.g.timeoutSet && cmd.defaultTimeout > 0 {
		c.g.timeout = cmd.defaultTimeout
	}
	if c.g.timeout <= 0 {
		return c.report(&usageError{msg: "--timeout must be positive", cmd: cmd.name})
	}
	if c.c, err = client.New(c.g.url, c.g.apiKey, c.httpClient()); err != nil {
		return c.report(&usageError{msg: fmt.Sprintf("--url: %v", err), cmd: cmd.name})
	}
	err = cmd.run(ctx, c, &o, pos)
	var ue *usageError
	if errors.As(err, &ue) && ue.cmd == "" {
		ue.cmd = cmd.name
	}
	return c.report(err)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// lookup finds the command named by the first one, two or three words of
// args (the longest that names one) and returns the arguments after it. A
// group without a known subcommand is a usage error of that group; -h or
// --help after a group asks for its help.
func lookup(args []string) (command, []string, error) {
	for n := min(3, len(args)); n >= 1; n-- {
		if c, ok := commands[strings.Join(args[:n], " ")]; ok {
			return c, args[n:], nil
		}
	}
	for n := min(2, len(args)); n >= 1; n-- {
		g := strings.Join(args[:n], " ")
		if len(subcommands(g)) == 0 {
			continue
		}
		switch {
		case len(args) == n:
			return command{}, nil, &usageError{msg: g + ": missing subcommand", cmd: g}
		case args[n] == "-h" || args[n] == "--help" || args[n] == "-help":
			return command{}, nil, &helpRequest{cmd: g}
		}
		return command{}, nil, &usageError{msg: fmt.Sprintf("unknown subcommand %q (%s has: %s)",
			strings.Join(args[:n+1], " "), g, strings.Join(subcommands(g), ", ")), cmd: g}
	}
	return command{}, nil, &usageError{msg: fmt.Sprintf("unknown command %q", args[0])}
}

// parseInterspersed parses fs over args, allowing flags after positional
// arguments ("scripts run pumps.start --args '{}'"); "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagError rewords an error of package flag for a person: the flag as it
// is typed (--name, not flag's -name), and what a value must look like
// ("unknown flag --frob"; `--timeout "abc": want a duration such as 30s,
// 500ms or 2m`; "--name needs a value"). Other errors pass unchanged.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	dash := func(name string) string {
		if len(name) == 1 {
			return "-" + name
		}
		return "--" + name
	}
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Sprintf("unknown flag %s", dash(strings.TrimPrefix(name, "-")))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("%s needs a value", dash(strings.TrimPrefix(name, "-")))
	}
	// flag: invalid value "abc" for flag -timeout: parse error
	var val, name string
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		if i := strings.Index(rest, " for flag -"); i > 0 {
			val = rest[:i]
			name, _, _ = strings.Cut(rest[i+len(" for flag -"):], ":")
		}
	}
	if name == "" {
		return msg
	}
	want := "not a valid value"
	if f := fs.Lookup(name); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			switch g.Get().(type) {
			case time.Duration:
				want = "want a duration such as 30s, 500ms or 2m"
			case bool:
				want = "want true or false"
			case int, int64, uint, uint64:
				want = "want a whole number"
			}
		}
	}
	return fmt.Sprintf("%s %s: %s", dash(name), val, want)
}

// report prints err and returns the exit code: 0 for nil and for a help
// request (the help on stdout), 2 for a usage error (the error, the usage
// line of its command and where to read more, on stderr), 1 otherwise (a
// problem answer prints its detail, status and kind).
func (c *cli) report(err error) int {
	var ue *usageError
	var hr *helpRequest
	var pe *client.ProblemError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &hr):
		if err := printHelp(c.stdout, hr.cmd); err != nil {
			return c.report(err)
		}
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(c.stderr, "qubiqctl: %s\n", ue.msg)
		printUsageLine(c.stderr, ue.cmd)
		return exitUsage
	case errors.As(err, &pe):
		if c.g.json {
			// --json prints the API's problem document too, for scripts.
			_ = c.printJSON(apitypes.Problem{Type: pe.Type, Title: pe.Title, Status: pe.Status, Detail: pe.Detail, Kind: pe.Kind})
		}
		if pe.Status == http.StatusUnauthorized && c.g.apiKey == "" {
			// The cause first: the daemon's words follow.
			fmt.Fprintln(c.stderr, "qubiqctl: no API key given: use --api-key or QUBIQ_API_KEY")
		}
		fmt.Fprintf(c.stderr, "qubiqctl: %s\n", pe.Error())
	default:
		fmt.Fprintf(c.stderr, "qubiqctl: %v\n", err)
		tlsHint(c.stderr, err)
		if errors.Is(err, syscall.ECONNREFUSED) {
			fmt.Fprintf(c.stderr, "qubiqctl: is qubiqd running at %s? (--url or QUBIQ_URL)\n", c.g.url)
		}
	}
	return exitError
}
