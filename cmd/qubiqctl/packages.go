package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/client"
)

// The packages commands (docs/qubiqctl.md, "packages": packages
// list|install|upload|remove|check): the script sandbox's Python packages,
// over /api/v1/sandbox/... (permission sandbox_admin). Installs stream
// pip's progress (NDJSON) to stderr and print the result; --json prints the
// API's lines as they come.
func init() {
	ackFlag := func(fs *flag.FlagSet, _ *opts) {
		fs.BoolVar(&pkgFlags.ack, "acknowledge-widening", false,
			"acknowledge that the packages widen what scripts can do (without it the install only lists what they widen)")
		fs.BoolVar(&pkgFlags.ack, "yes", false, "same as --acknowledge-widening")
	}
	commands["packages list"] = command{name: "packages list", help: "List the Python packages installed for scripts.",
		run: cmdPackagesList}
	commands["packages install"] = command{name: "packages install", args: "REQUIREMENT [--acknowledge-widening]",
		help:  "Install a package from python.index_url (name or name==1.2); exit 1 listing what it widens unless acknowledged.",
		flags: ackFlag, run: cmdPackagesInstall, defaultTimeout: defaultRunTimeout}
	commands["packages upload"] = command{name: "packages upload", args: "FILE.whl... [--acknowledge-widening]",
		help:  "Install wheel files without an index (the air-gapped route); every dependency must be among them or installed.",
		flags: ackFlag, run: cmdPackagesUpload, defaultTimeout: defaultRunTimeout}
	commands["packages remove"] = command{name: "packages remove", args: "NAME",
		help: "Remove a package an administrator installed; workers restart without it.", run: cmdPackagesRemove,
		defaultTimeout: defaultRunTimeout}
	commands["packages check"] = command{name: "packages check",
		help: "Can the daemon reach python.index_url? Prints yes/no, how long, why not; exit 1 when not.", run: cmdPackagesCheck}
}

// pkgFlags holds the packages commands' own flag; its flags function
// resets it at every parse.
var pkgFlags struct{ ack bool }

func cmdPackagesList(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	var list []apitypes.SandboxPackage
	if err := c.do(ctx, http.MethodGet, "/api/v1/sandbox/packages", nil, &list); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(nonNilSlice(list))
	}
	return printPackages(c.stdout, list)
}

func printPackages(w io.Writer, list []apitypes.SandboxPackage) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no packages installed")
		return err
	}
	t := newTable(w, "PACKAGE", "VERSION", "IMPORTS", "REQUESTED", "SOURCE", "BY", "WIDENS")
	for _, p := range list {
		req := "dependency"
		if p.Requested {
			req = orDash(p.Requirement)
		}
		t.row(p.Name, p.Version, orDash(strings.Join(p.Imports, ",")), req, orDash(p.Source), orDash(p.InstalledBy),
			widensSummary(p.Widens))
	}
	return t.flush()
}

// widensSummary is the specific warnings of a package, or "generic".
func widensSummary(ws []string) string {
	if len(ws) <= 1 {
		return "generic"
	}
	return strings.Join(ws[:len(ws)-1], "; ")
}

func cmdPackagesInstall(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "a requirement (name or name==version)"); err != nil {
		return err
	}
	body, err := json.Marshal(apitypes.PackageInstallRequest{Requirement: args[0], AcknowledgeWidening: pkgFlags.ack})
	if err != nil {
		return err
	}
	return c.packageStream(ctx, "/api/v1/sandbox/packages", "application/json", strings.NewReader(string(body)))
}

func cmdPackagesUpload(ctx context.Context, c *cli, _ *opts, args []string) error {
	if len(args) == 0 {
		return usagef("packages upload: give one or more wheel files")
	}
	for _, f := range args {
		if !strings.HasSuffix(f, ".whl") {
			return usagef("packages upload: %s is not a wheel file (.whl)", f)
		}
		if _, err := os.Stat(f); err != nil {
			return err
		}
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			for _, f := range args {
				in, err := os.Open(f)
				if err != nil {
					return err
				}
				part, err := mw.CreateFormFile("wheel", filepath.Base(f))
				if err == nil {
					_, err = io.Copy(part, in)
				}
				in.Close()
				if err != nil {
					return err
				}
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	q := url.Values{}
	if pkgFlags.ack {
		q.Set("acknowledge_widening", "true")
	}
	path := "/api/v1/sandbox/packages/upload"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return c.packageStream(ctx, path, mw.FormDataContentType(), pr)
}

// packageStream posts an install and follows its answer: a problem (409
// with what the packages widen, 400, ...), or NDJSON progress then the
// result.
func (c *cli) packageStream(ctx context.Context, path, contentType string, body io.Reader) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.g.url, "/")+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", apitypes.NDJSONContentType+", application/problem+json")
	if c.g.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.g.apiKey)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var wp apitypes.WideningProblem
		if resp.StatusCode == http.StatusConflict && json.Unmarshal(raw, &wp) == nil && len(wp.Widenings) > 0 {
			if c.g.json {
				if err := c.printJSON(wp); err != nil {
					return err
				}
			} else if err := printWidenings(c.stdout, wp.Widenings); err != nil {
				return err
			}
			return errors.New("not installed: these packages widen what scripts can do; " +
				"repeat with --acknowledge-widening to install them")
		}
		return problemOfAnswer(resp, raw)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if c.g.json {
			fmt.Fprintln(c.stdout, string(line))
		}
		var ev apitypes.PackageEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("the daemon's progress line %q: %w", line, err)
		}
		switch ev.Event {
		case apitypes.PackageEventProgress:
			if !c.g.json {
				fmt.Fprintf(c.stderr, "%s: %s\n", ev.Step, ev.Message)
			}
		case apitypes.PackageEventDone:
			if ev.Result == nil {
				return errors.New("the daemon's result line has no result")
			}
			if !c.g.json {
				return printChange(c.stdout, *ev.Result)
			}
			return nil
		case apitypes.PackageEventError:
			if ev.Error == nil {
				return errors.New("the install failed without a reason")
			}
			return &client.ProblemError{Status: ev.Error.Status, Kind: ev.Error.Kind, Title: ev.Error.Title,
				Detail: ev.Error.Detail, Type: ev.Error.Type}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the daemon's progress: %w", err)
	}
	return errors.New("the daemon's answer ended before the install did; check `qubiqctl packages list`")
}

// problemOfAnswer turns an error answer into a *client.ProblemError.
func problemOfAnswer(resp *http.Response, raw []byte) error {
	pe := &client.ProblemError{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode),
		RetryAfter: resp.Header.Get("Retry-After")}
	var p apitypes.Problem
	if json.Unmarshal(raw, &p) == nil && p.Status != 0 {
		pe.Kind, pe.Detail, pe.Type = p.Kind, p.Detail, p.Type
	} else {
		pe.Detail = strings.TrimSpace(string(raw))
	}
	return pe
}

func printWidenings(w io.Writer, ws []apitypes.PackageWidening) error {
	t := newTable(w, "PACKAGE", "VERSION", "REQUESTED", "WIDENS")
	for _, x := range ws {
		for i, why := range x.Widens {
			if i == 0 {
				t.row(x.Package, orDash(x.Version), yesNo(x.Requested), why)
			} else {
				t.row("", "", "", why)
			}
		}
	}
	return t.flush()
}

func printChange(w io.Writer, ch apitypes.PackageChange) error {
	if _, err := fmt.Fprintf(w, "%s %s done in %d ms; scripts may import: %s\n", ch.Action,
		strings.Join(ch.Packages, ", "), ch.DurationMS, strings.Join(ch.Allowed, ", ")); err != nil {
		return err
	}
	return printPackages(w, ch.Installed)
}

func cmdPackagesRemove(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "a package name"); err != nil {
		return err
	}
	var ch apitypes.PackageChange
	if err := c.do(ctx, http.MethodDelete, "/api/v1/sandbox/packages/"+url.PathEscape(args[0]), nil, &ch); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(ch)
	}
	return printChange(c.stdout, ch)
}

func cmdPackagesCheck(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	var r apitypes.IndexCheck
	if err := c.do(ctx, http.MethodGet, "/api/v1/sandbox/check", nil, &r); err != nil {
		return err
	}
	if c.g.json {
		if err := c.printJSON(r); err != nil {
			return err
		}
	} else {
		t := newTable(c.stdout)
		t.row("index", orDash(r.IndexURL))
		t.row("reachable", yesNo(r.Reachable))
		t.row("took", fmt.Sprintf("%.1f ms", r.DurationMS))
		if r.Status != 0 {
			t.row("status", fmt.Sprint(r.Status))
		}
		if r.Reason != "" {
			t.row("why not", r.Reason)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if !r.Reachable {
		return errors.New("the package index is not reachable: " + r.Reason)
	}
	return nil
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
