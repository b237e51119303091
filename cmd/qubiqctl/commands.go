package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"strings"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/value"
)

// commands is every subcommand, by its full name.
var commands = map[string]command{
	"status": {name: "status", help: "Show the daemon's health: status, reasons, sandbox, devices, the firmware slots. Exit 1 when it is failed.",
		run: cmdStatus},
	"provision": {name: "provision", args: "--password-file FILE",
		help: "Set the first admin password (FILE, or - for stdin); revokes the bootstrap token.",
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.StringVar(&o.passwordFile, "password-file", "", "file holding the password, at least 8 characters (- for stdin; trailing newlines are dropped)")
		}, run: cmdProvision},
	"tags write": {name: "tags write", args: "PATH=VALUE...",
		help: `Write tags; VALUE is JSON when it parses (42, true, "42", [1,2]), else a string. Exit 1 unless every write is Good.`,
		run:  cmdTagsWrite, complete: completeTags},
	"scripts push": {name: "scripts push", args: "MODULE FILE", help: "Save FILE (- for stdin) as the next version of MODULE.",
		run: cmdScriptsPush},
	"scripts run": {name: "scripts run", args: "MODULE.ENTRY [--args JSON]", help: "Run a gateway script entry and print its result.",
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.StringVar(&o.args, "args", "", "JSON value passed to the entry as args (default {})")
		}, run: cmdScriptsRun, defaultTimeout: defaultRunTimeout},
	"scripts lint": {name: "scripts lint", args: "FILE", help: "Lint FILE (- for stdin); exit 1 when a diagnostic is an error.",
		run: cmdScriptsLint},
	"scripts list": {name: "scripts list", help: "List saved script modules.", run: cmdScriptsList},
	"apikeys create": {name: "apikeys create",
		args: "--name N --scopes a,b --write-level L [--permissions p,q] [--prefixes P,Q] [--expires RFC3339]",
		help: "Create an API key; its token is printed once.",
		long: apikeyGrantHelp,
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.StringVar(&o.name, "name", "", "key name")
			fs.StringVar(&o.scopes, "scopes", "", "comma-separated scopes (tag:read,tag:write,...)")
			fs.StringVar(&o.level, "write-level", "", "write level: view, operate, supervise or design")
			fs.StringVar(&o.perms, "permissions", "", "comma-separated permissions (designer,users_admin,...)")
			fs.StringVar(&o.prefixes, "prefixes", "", "comma-separated tag path prefixes")
			fs.StringVar(&o.expires, "expires", "", "expiry, RFC 3339 (2026-01-01T00:00:00Z)")
		}, run: cmdAPIKeysCreate},
	"apikeys list":   {name: "apikeys list", help: "List API keys (never their tokens).", run: cmdAPIKeysList},
	"apikeys revoke": {name: "apikeys revoke", args: "ID", help: "Revoke an API key.", run: cmdAPIKeysRevoke},
}

func nargs(args []string, min, max int, what string) error {
	if len(args) < min || (max >= 0 && len(args) > max) {
		return usagef("want %s, got %d argument(s)", what, len(args))
	}
	return nil
}

func cmdStatus(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	h, err := c.c.Health(ctx)
	if err != nil {
		return err
	}
	if c.g.json {
		// The whole answer, with the members apitypes.Health leaves out
		// (tls, firmware).
		var raw json.RawMessage
		if err = c.do(ctx, "GET", "/api/v1/health", nil, &raw, 503); err == nil {
			err = c.printJSON(raw)
		}
	} else if err = printHealth(c.stdout, h); err == nil {
		if err = c.printTLS(ctx); err == nil {
			err = c.printFirmware(ctx)
		}
	}
	if err == nil && h.Status == apitypes.HealthFailed {
		err = fmt.Errorf("the daemon's health is %q: %s", h.Status, strings.Join(h.Reasons, "; "))
	}
	return err
}

func cmdProvision(ctx context.Context, c *cli, o *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	if o.passwordFile == "" {
		return usagef("provision: --password-file is required (the password never goes on the command line)")
	}
	b, err := readInput(o.passwordFile)
	if err != nil {
		return err
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return fmt.Errorf("password file %s is empty", o.passwordFile)
	}
	if err := c.c.Provision(ctx, pw); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(map[string]string{"status": "provisioned"})
	}
	fmt.Fprintln(c.stdout, "provisioned: the admin password is set and the bootstrap token revoked")
	return nil
}

// parseWrite parses PATH=VALUE: VALUE as JSON (integers exact) when it
// parses, else the text as a string.
func parseWrite(arg string) (apitypes.TagWrite, error) {
	path, raw, ok := strings.Cut(arg, "=")
	if !ok || path == "" {
		return apitypes.TagWrite{}, usagef("tags write: %q is not PATH=VALUE", arg)
	}
	if v, err := apitypes.DecodeValue([]byte(raw)); err == nil && strings.TrimSpace(raw) != "" {
		return apitypes.TagWrite{Path: path, Value: v}, nil
	}
	return apitypes.TagWrite{Path: path, Value: value.Value(raw)}, nil
}

func cmdTagsWrite(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, -1, "PATH=VALUE..."); err != nil {
		return err
	}
	writes := make([]apitypes.TagWrite, 0, len(args))
	for i, a := range args {
		w, err := parseWrite(a)
		if err != nil {
			// "tags write Line1/Pump/Setpoint 900" (or "... = 900"): the value
			// went into the next word.
			if !strings.Contains(a, "=") && i+1 < len(args) {
				rest := strings.Join(args[i+1:], " ")
				if v := strings.TrimSpace(strings.TrimPrefix(rest, "=")); v != "" && !strings.Contains(v, "=") {
					return usagef("tags write: %q is not PATH=VALUE; did you mean %q? (no spaces around =)", a, a+"="+v)
				}
			}
			return err
		}
		writes = append(writes, w)
	}
	res, err := c.c.WriteTags(ctx, writes)
	if err != nil {
		return err
	}
	if c.g.json {
		err = c.printJSON(res)
	} else {
		t := newTable(c.stdout, "PATH", "STATUS", "REASON")
		for _, r := range res {
			t.row(r.Path, r.Status, r.Reason)
		}
		err = t.flush()
	}
	if err != nil {
		return err
	}
	bad := 0
	for _, r := range res {
		if r.Status != value.Good.String() {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d writes were not written (status not Good)", bad, len(res))
	}
	return nil
}

// readInput reads a file, or stdin for "-".
func readInput(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	b, err := os.ReadFile(name)
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		// "ann.pw: no such file or directory", not os's "read ann.pw: open
		// ann.pw: no such file or directory"
		return nil, fmt.Errorf("%s: %w", name, pe.Err)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}

func cmdScriptsPush(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 2, 2, "MODULE FILE"); err != nil {
		return err
	}
	code, err := readInput(args[1])
	if err != nil {
		return err
	}
	saved, err := c.c.SaveScript(ctx, args[0], string(code))
	if err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(saved)
	}
	fmt.Fprintf(c.stdout, "saved %s version %d\n\n", saved.Module, saved.Version)
	t := newTable(c.stdout, "ENTRY", "TIMEOUT")
	for _, e := range saved.Entries {
		t.row(e.Name, (time.Duration(e.TimeoutMS) * time.Millisecond).String())
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(saved.Diagnostics) > 0 {
		fmt.Fprintln(c.stdout)
		return printDiagnostics(c.stdout, args[1], saved.Diagnostics)
	}
	return nil
}

func cmdScriptsRun(ctx context.Context, c *cli, o *opts, args []string) error {
	if err := nargs(args, 1, 1, "MODULE.ENTRY"); err != nil {
		return err
	}
	module, entry, ok := strings.Cut(args[0], ".")
	if !ok || module == "" || entry == "" || strings.Contains(entry, ".") {
		return usagef("scripts run: %q is not MODULE.ENTRY", args[0])
	}
	// Without --args the entry gets {} (docs/scripting.md, "args and the
	// result"), sent explicitly.
	raw := json.RawMessage("{}")
	if o.args != "" {
		if !json.Valid([]byte(o.args)) {
			return usagef("scripts run: --args %q is not JSON (quote strings: --args '\"text\"')", o.args)
		}
		raw = json.RawMessage(o.args)
	}
	run, err := c.c.RunScript(ctx, module, entry, raw)
	if err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(run)
	}
	t := newTable(c.stdout)
	t.row("result", string(compactJSON(run.Result)))
	t.row("duration", (time.Duration(run.DurationMS) * time.Millisecond).String())
	if err := t.flush(); err != nil {
		return err
	}
	if len(run.Logs) > 0 {
		fmt.Fprintln(c.stdout)
		t = newTable(c.stdout, "LEVEL", "MESSAGE")
		for _, l := range run.Logs {
			t.row(l.Level, l.Msg)
		}
		return t.flush()
	}
	return nil
}

func cmdScriptsLint(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "FILE"); err != nil {
		return err
	}
	code, err := readInput(args[0])
	if err != nil {
		return err
	}
	res, err := c.c.LintScript(ctx, string(code))
	if err != nil {
		return err
	}
	if c.g.json {
		err = c.printJSON(res)
	} else if len(res.Diagnostics) == 0 {
		fmt.Fprintf(c.stdout, "%s: no findings (linter %s)\n", args[0], res.Linter)
	} else {
		err = printDiagnostics(c.stdout, args[0], res.Diagnostics)
	}
	if err != nil {
		return err
	}
	errs := 0
	for _, d := range res.Diagnostics {
		if d.Severity == "error" {
			errs++
		}
	}
	if errs > 0 {
		return fmt.Errorf("%s: %d error(s) (linter %s)", args[0], errs, res.Linter)
	}
	return nil
}

func cmdScriptsList(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	list, err := c.c.ListScripts(ctx)
	if err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(list)
	}
	t := newTable(c.stdout, "MODULE", "VERSION", "ENTRIES", "LIVEVIEW")
	for _, s := range list {
		names := make([]string, len(s.Entries))
		for i, e := range s.Entries {
			names[i] = e.Name
		}
		t.row(s.Module, fmt.Sprint(s.Version), strings.Join(names, ","), strings.Join(s.LiveView, ","))
	}
	return t.flush()
}

func splitList(s string) []string {
	var out []string
	for x := range strings.SplitSeq(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func cmdAPIKeysCreate(ctx context.Context, c *cli, o *opts, args []string) error {
	if err := nargs(args, 0, 0, "no positional arguments"); err != nil {
		return err
	}
	if o.name == "" || o.level == "" {
		return usagef("apikeys create: --name and --write-level are required")
	}
	req := apitypes.APIKeyRequest{Name: o.name, Scopes: splitList(o.scopes), WriteLevel: o.level,
		Permissions: splitList(o.perms), Prefixes: splitList(o.prefixes)}
	if o.expires != "" {
		t, err := time.Parse(time.RFC3339, o.expires)
		if err != nil {
			return usagef("apikeys create: --expires %q is not RFC 3339 (2026-01-01T00:00:00Z)", o.expires)
		}
		req.Expires = &t
	}
	created, err := c.c.CreateAPIKey(ctx, req)
	if err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(created)
	}
	t := newTable(c.stdout)
	t.row("id", created.ID)
	t.row("token", created.Token)
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.stderr, "qubiqctl: the token is shown only this once; store it now")
	return nil
}

func cmdAPIKeysList(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	keys, err := c.c.ListAPIKeys(ctx)
	if err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(keys)
	}
	t := newTable(c.stdout, "ID", "NAME", "SCOPES", "WRITE LEVEL", "PERMISSIONS", "PREFIXES", "EXPIRES", "CREATED")
	for _, k := range keys {
		t.row(k.ID, k.Name, strings.Join(k.Scopes, ","), k.WriteLevel, strings.Join(k.Permissions, ","),
			strings.Join(k.Prefixes, ","), formatTimePtr(k.Expires), formatTime(k.Created))
	}
	return t.flush()
}

func cmdAPIKeysRevoke(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "ID"); err != nil {
		return err
	}
	done, err := c.c.RevokeAPIKey(ctx, args[0])
	if err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(map[string]any{"id": args[0], "status": "revoked", "already": done.Already})
	}
	printDone(c.stdout, done, "revoked "+args[0])
	return nil
}

// apikeyGrantHelp lists what a key may hold (docs/security.md, "Scopes" and
// "Permissions"; TestHelp_APIKeyScopes keeps it in step with that page).
const apikeyGrantHelp = `Scopes: tag:read, tag:write, alarm:read, alarm:ack, db:read, db:write,
hist:read, hist:write, vars:read, vars:write, file:read, file:write,
script:execute. Permissions: designer, sandbox_admin, users_admin, firmware.
Write levels: view < operate < supervise < design. A key holds at most what
its creator holds; docs/security.md says what each allows.`
