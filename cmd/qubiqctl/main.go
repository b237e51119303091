// Command qubiqctl is the technician CLI of QUBIQ Edge: it talks HTTP(S) to
// a running qubiqd through package client only (DESIGN.md, "Binaries").
//
// Global flags (before or after the subcommand): --url (QUBIQ_URL, default
// http://127.0.0.1:8080), --api-key (QUBIQ_API_KEY), --json (print the
// API's JSON instead of a table), --timeout (per request, default 30s;
// scripts run defaults to 10m30s). Exit codes: 0 ok, 1 error (the problem's
// detail on stderr), 2 usage.
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
	"sort"
	"strings"
	"syscall"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/client"
)

// Defaults of the global flags (DESIGN.md, "Binaries").
const (
	defaultURL        = "http://127.0.0.1:8080"
	defaultTimeout    = 30 * time.Second
	defaultRunTimeout = 10*time.Minute + 30*time.Second // python.gateway_timeout max + margin
)

// Exit codes (DESIGN.md, "Binaries").
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

// usageError is a wrong invocation: run prints it and the usage, exit 2.
type usageError struct{ msg string }

// Error returns the message.
func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// command is one subcommand: "status", or "tags read" in group "tags".
type command struct {
	name  string // "tags read"
	args  string // usage of its positional arguments and flags
	help  string
	flags func(fs *flag.FlagSet, o *opts)
	run   func(ctx context.Context, c *cli, o *opts, args []string) error
	// defaultTimeout, when set, replaces defaultTimeout if --timeout is
	// not given.
	defaultTimeout time.Duration
}

// opts holds the subcommand-specific flags of every command.
type opts struct {
	args                                 string
	name, scopes, level, perms, prefixes string
	expires                              string
	passwordFile                         string
	realm                                string
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
	if err := fs.Parse(args); err != nil {
		return c.usage(err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return c.usage(usagef("missing subcommand"))
	}
	if rest[0] == "help" {
		printUsage(stdout)
		return exitOK
	}
	cmd, rest, err := lookup(rest)
	if err != nil {
		return c.usage(err)
	}

	var o opts
	sfs := flag.NewFlagSet("qubiqctl "+cmd.name, flag.ContinueOnError)
	sfs.SetOutput(io.Discard)
	c.g.register(sfs)
	if cmd.flags != nil {
		cmd.flags(sfs, &o)
	}
	pos, err := parseInterspersed(sfs, rest)
	if err != nil {
		return c.usage(fmt.Errorf("%s: %w", cmd.name, err))
	}
	for _, f := range []*flag.FlagSet{fs, sfs} {
		f.Visit(func(f *flag.Flag) { c.g.timeoutSet = c.g.timeoutSet || f.Name == "timeout" })
	}
	if !c.g.timeoutSet && cmd.defaultTimeout > 0 {
		c.g.timeout = cmd.defaultTimeout
	}
	if c.g.timeout <= 0 {
		return c.usage(usagef("--timeout must be positive"))
	}
	if c.c, err = client.New(c.g.url, c.g.apiKey, c.httpClient()); err != nil {
		return c.usage(usagef("--url: %v", err))
	}
	return c.report(cmd.run(ctx, c, &o, pos))
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// lookup finds the command named by the first one or two words of args and
// returns the arguments after them.
func lookup(args []string) (command, []string, error) {
	if c, ok := commands[args[0]]; ok {
		return c, args[1:], nil
	}
	if _, ok := groups[args[0]]; !ok {
		return command{}, nil, usagef("unknown subcommand %q", args[0])
	}
	if len(args) < 2 {
		return command{}, nil, usagef("%s: missing subcommand (%s)", args[0], strings.Join(groups[args[0]], ", "))
	}
	name := args[0] + " " + args[1]
	c, ok := commands[name]
	if !ok {
		return command{}, nil, usagef("unknown subcommand %q (%s has: %s)", name, args[0], strings.Join(groups[args[0]], ", "))
	}
	return c, args[2:], nil
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

// usage prints err and the usage to stderr and returns exit code 2 (0 for
// -h/--help, with the usage on stdout).
func (c *cli) usage(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		printUsage(c.stdout)
		return exitOK
	}
	fmt.Fprintf(c.stderr, "qubiqctl: %v\n\n", err)
	printUsage(c.stderr)
	return exitUsage
}

// report prints err and returns the exit code: 0 for nil, 2 for a usage
// error, 1 otherwise (a problem answer prints its detail, status and kind).
func (c *cli) report(err error) int {
	var ue *usageError
	var pe *client.ProblemError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return c.usage(err)
	case errors.As(err, &pe):
		if c.g.json {
			// --json prints the API's problem document too, for scripts.
			_ = c.printJSON(apitypes.Problem{Type: pe.Type, Title: pe.Title, Status: pe.Status, Detail: pe.Detail, Kind: pe.Kind})
		}
		fmt.Fprintf(c.stderr, "qubiqctl: %s\n", pe.Error())
		if pe.Status == http.StatusUnauthorized && c.g.apiKey == "" {
			fmt.Fprintln(c.stderr, "qubiqctl: no API key given: use --api-key or QUBIQ_API_KEY")
		}
	default:
		fmt.Fprintf(c.stderr, "qubiqctl: %v\n", err)
		tlsHint(c.stderr, err)
		if errors.Is(err, syscall.ECONNREFUSED) {
			fmt.Fprintf(c.stderr, "qubiqctl: is qubiqd running at %s? (--url or QUBIQ_URL)\n", c.g.url)
		}
	}
	return exitError
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `usage: qubiqctl [--url URL] [--api-key KEY] [--json] [--timeout D] COMMAND [ARGS]

Talks to a running qubiqd over its REST API.

global flags (also accepted after COMMAND):
  --url URL        daemon URL (env QUBIQ_URL; default `+defaultURL+`)
  --api-key KEY    API key (env QUBIQ_API_KEY)
  --json           print the API's JSON instead of a table
  --timeout D      timeout of each request (default 30s; scripts run: 10m30s)
  --tls-fingerprint SHA256
                   trust the daemon's self-signed certificate with this
                   fingerprint (env QUBIQ_TLS_FINGERPRINT; see status or the log)

commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := commands[n]
		fmt.Fprintf(w, "  %s\n      %s\n", strings.TrimSpace(n+" "+c.args), c.help)
	}
	fmt.Fprint(w, "\nexit codes: 0 ok, 1 error, 2 usage\n")
}
