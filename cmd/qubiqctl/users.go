package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/client"
)

// The users commands (docs/security.md, "Users and sessions": users
// add|passwd|disable|list)
// and the TLS line of status. They call the API with raw requests through
// do, which answers errors as *client.ProblemError like package client.
func init() {
	commands["users list"] = command{name: "users list", help: "List users (never their password hashes).", run: cmdUsersList}
	commands["users add"] = command{name: "users add",
		args: "--name N --realm platform|operator [--level view|operate|supervise] [--permissions p,q] --password-file FILE",
		help: "Add a user: an operator with a level, or a platform user with permissions (designer, sandbox_admin, users_admin, firmware).",
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.StringVar(&o.name, "name", "", "user name")
			fs.StringVar(&o.realm, "realm", "", "platform or operator")
			fs.StringVar(&o.level, "level", "", "an operator's level: view, operate or supervise")
			fs.StringVar(&o.perms, "permissions", "", "a platform user's comma-separated permissions")
			fs.StringVar(&o.passwordFile, "password-file", "", "file holding the password, at least 8 characters (- for stdin; trailing newlines are dropped)")
		}, run: cmdUsersAdd}
	commands["users passwd"] = command{name: "users passwd", args: "NAME --password-file FILE",
		help: "Set a user's password; the user's open sessions end at once.",
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.StringVar(&o.passwordFile, "password-file", "", "file holding the password, at least 8 characters (- for stdin; trailing newlines are dropped)")
		}, run: cmdUsersPasswd}
	commands["users disable"] = command{name: "users disable", args: "NAME",
		help: "Disable a user: no more logins, open sessions and panels end at once.", run: cmdUsersDisable}
}

// do sends one request to the daemon's API with the CLI's URL, API key and
// timeout, and decodes a 2xx answer (or one of the statuses in also) into
// out.
func (c *cli) do(ctx context.Context, method, path string, in, out any, also ...int) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.g.url, "/")+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.g.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.g.apiKey)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	for _, s := range also {
		ok = ok || resp.StatusCode == s
	}
	if !ok {
		pe := &client.ProblemError{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode), RetryAfter: resp.Header.Get("Retry-After")}
		var p apitypes.Problem
		if json.Unmarshal(raw, &p) == nil && p.Status != 0 {
			pe.Kind, pe.Detail, pe.Type = p.Kind, p.Detail, p.Type
		} else {
			pe.Detail = strings.TrimSpace(string(raw))
		}
		return pe
	}
	if out == nil || resp.StatusCode == http.StatusNoContent || len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

func readPassword(o *opts, cmd string) (string, error) {
	if o.passwordFile == "" {
		return "", usagef("%s: --password-file is required (the password never goes on the command line)", cmd)
	}
	b, err := readInput(o.passwordFile)
	if err != nil {
		return "", err
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("password file %s is empty", o.passwordFile)
	}
	return pw, nil
}

func cmdUsersList(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	var us []apitypes.UserInfo
	if err := c.do(ctx, http.MethodGet, "/api/v1/users", nil, &us); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(us)
	}
	t := newTable(c.stdout, "NAME", "REALM", "LEVEL", "PERMISSIONS", "DISABLED", "PASSWORD CHANGED")
	for _, u := range us {
		t.row(u.Name, u.Realm, orDash(u.Level), orDash(strings.Join(u.Permissions, ",")), yesNo(u.Disabled), formatTime(u.Changed))
	}
	return t.flush()
}

func cmdUsersAdd(ctx context.Context, c *cli, o *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments (flags only)"); err != nil {
		return err
	}
	if o.name == "" || o.realm == "" {
		return usagef("users add: --name and --realm are required")
	}
	pw, err := readPassword(o, "users add")
	if err != nil {
		return err
	}
	req := apitypes.UserRequest{Name: o.name, Realm: o.realm, Level: o.level, Permissions: splitList(o.perms), Password: pw}
	if err := c.do(ctx, http.MethodPost, "/api/v1/users", req, nil); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(map[string]string{"name": o.name, "status": "added"})
	}
	fmt.Fprintf(c.stdout, "user %s added\n", o.name)
	return nil
}

func cmdUsersPasswd(ctx context.Context, c *cli, o *opts, args []string) error {
	if err := nargs(args, 1, 1, "NAME"); err != nil {
		return err
	}
	pw, err := readPassword(o, "users passwd")
	if err != nil {
		return err
	}
	if err := c.do(ctx, http.MethodPut, "/api/v1/users/"+url.PathEscape(args[0])+"/password", apitypes.PasswordRequest{Password: pw}, nil); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(map[string]string{"name": args[0], "status": "password set"})
	}
	fmt.Fprintf(c.stdout, "password of %s set; its sessions ended\n", args[0])
	return nil
}

func cmdUsersDisable(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "NAME"); err != nil {
		return err
	}
	var done apitypes.Done
	if err := c.do(ctx, http.MethodPost, "/api/v1/users/"+url.PathEscape(args[0])+"/disable", nil, &done); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(map[string]any{"name": args[0], "status": "disabled", "already": done.Already})
	}
	printDone(c.stdout, done, "user "+args[0]+" disabled; its sessions ended")
	return nil
}

// printDone prints what the daemon says happened (apitypes.Done: "... was
// already revoked; nothing changed"), or fallback for a daemon that
// answered without a body.
func printDone(w io.Writer, d apitypes.Done, fallback string) {
	if d.Detail == "" {
		d.Detail = fallback
	}
	fmt.Fprintln(w, d.Detail)
}

// printTLS prints the listener's certificate line of status, when the
// daemon speaks HTTPS (health's "tls" object).
func (c *cli) printTLS(ctx context.Context) error {
	var h struct {
		TLS *apitypes.TLSInfo `json:"tls"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/v1/health", nil, &h, http.StatusServiceUnavailable); err != nil {
		return err
	}
	if h.TLS != nil {
		fmt.Fprintf(c.stdout, "tls:       %s, certificate SHA-256 %s, expires %s\n", h.TLS.Mode, h.TLS.FingerprintSHA256, formatTime(h.TLS.NotAfter))
	}
	return nil
}
