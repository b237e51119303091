package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"qubiq.dev/edge/api/apitypes"
)

// The appliance's commands (docs/appliance.md): flash a firmware bundle,
// write a backup, restore one, change the log level; and the slots' part
// of status. Uploads and the backup stream get a long default timeout.
func init() {
	commands["flash"] = command{name: "flash", args: "FILE [--force]",
		help: "Upload a signed firmware bundle (.qfw); the daemon checks it, stages it and restarts into the other slot, on trial.",
		long: "The daemon checks the signature and every hash against its trusted firmware keys before it keeps anything, " +
			"refuses another architecture always and a downgrade unless --force, then restarts; qubiq-slot installs the " +
			"bundle into the inactive slot and the new daemon confirms it after a healthy period (or it is rolled back). " +
			"`qubiqctl status` shows the slots and the last result.",
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.BoolVar(&o.force, "force", false, "allow a downgrade (never another architecture)")
		}, run: cmdFlash, defaultTimeout: uploadTimeout}
	commands["backup"] = command{name: "backup", args: "-o FILE [--passphrase-file FILE]",
		help: "Write a backup of the running appliance (store snapshot, project, files, trusted certificates, secrets key; every entry hashed) to FILE (- for stdout).",
		long: "Without --passphrase-file the connection secrets' key is in the backup as is: keep the file as carefully as " +
			"the appliance itself. With it, the key is sealed with the passphrase (argon2id, AES-256-GCM), and the restore needs it.",
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.StringVar(&o.output, "o", "", "the backup `file` to write (- for stdout)")
			fs.StringVar(&o.passwordFile, "passphrase-file", "", "seal the secrets key with the passphrase in `FILE` (- for stdin)")
		}, run: cmdBackup, defaultTimeout: uploadTimeout}
	commands["restore"] = command{name: "restore", args: "FILE [--keep-credentials] [--passphrase-file FILE]",
		help: "Restore a backup into this (fresh) appliance: the daemon checks it, restarts and restores it before its store opens.",
		long: "Connection secrets are sealed again under this appliance's key. The old appliance's API keys and sessions are " +
			"dropped unless --keep-credentials; users and their passwords stay. The store the appliance had is kept beside " +
			"the restored one (qubiq.db.before-restore-TIME).",
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.BoolVar(&o.keepCredentials, "keep-credentials", false, "carry the old appliance's API keys and sessions")
			fs.StringVar(&o.passwordFile, "passphrase-file", "", "the passphrase that sealed the backup's secrets, in `FILE` (- for stdin)")
		}, run: cmdRestore, defaultTimeout: uploadTimeout}
	commands["log-level"] = command{name: "log-level", args: "[debug|info|warn|error]",
		help: "Show the daemon's log level, or change it at run time (until the next start).", run: cmdLogLevel}
}

// uploadTimeout is the default --timeout of the upload and backup commands.
const uploadTimeout = time.Hour

// send does one request with a raw body and returns the answer when it is
// 2xx; else the problem it carries, as an error.
func (c *cli) send(ctx context.Context, method, path, contentType string, body io.Reader, size int64, pass string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.g.url, "/")+path, body)
	if err != nil {
		return nil, err
	}
	if pass != "" {
		req.Header.Set(apitypes.PassphraseHeader, pass)
	}
	if body != nil {
		req.ContentLength = size
		req.Header.Set("Content-Type", contentType)
	}
	if c.g.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.g.apiKey)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, problemOfAnswer(resp, raw)
	}
	return resp, nil
}

// progress reports an upload's bytes on stderr, every 10 % (and at the
// end), unless --json.
type progress struct {
	r          io.Reader
	w          io.Writer
	what       string
	n, total   int64
	nextReport int64
}

func (p *progress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if p.w != nil && p.total > 0 && (p.n >= p.nextReport || (err == io.EOF && p.nextReport <= p.total)) {
		fmt.Fprintf(p.w, "%s: %d of %d bytes sent (%d%%)\n", p.what, p.n, p.total, p.n*100/p.total)
		p.nextReport = p.n + p.total/10
		if p.n >= p.total {
			p.nextReport = p.total + 1
		}
	}
	return n, err
}

// upload posts FILE's bytes to path with progress.
func (c *cli) upload(ctx context.Context, path, file, what, pass string) (*http.Response, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	p := &progress{r: f, what: what, total: fi.Size(), nextReport: fi.Size() / 10}
	if !c.g.json {
		p.w = c.stderr
	}
	return c.send(ctx, http.MethodPost, path, "application/octet-stream", p, fi.Size(), pass)
}

func decodeAnswer(resp *http.Response, out any) error {
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", resp.Request.Method, resp.Request.URL.Path, err)
	}
	return nil
}

func cmdFlash(ctx context.Context, c *cli, o *opts, args []string) error {
	if err := nargs(args, 1, 1, "the bundle FILE"); err != nil {
		return err
	}
	path := "/api/v1/firmware"
	if o.force {
		path += "?force=true"
	}
	resp, err := c.upload(ctx, path, args[0], "flash "+filepath.Base(args[0]), "")
	if err != nil {
		return err
	}
	var res apitypes.FlashResult
	if err := decodeAnswer(resp, &res); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(res)
	}
	forced := ""
	if res.Forced {
		forced = " (forced)"
	}
	fmt.Fprintf(c.stdout, "bundle %s (%s, signed by %s, %d bytes) verified%s; staged for slot %s, replacing %s\n",
		res.Version, res.Arch, res.Key, res.Size, forced, res.Slot, orDash(res.Previous))
	fmt.Fprintln(c.stdout, "the daemon restarts to install it, on trial; `qubiqctl status` shows when it is confirmed")
	return nil
}

func cmdBackup(ctx context.Context, c *cli, o *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	if o.output == "" {
		return usagef("backup: -o FILE is required (- for stdout)")
	}
	pass, err := readPassphrase(o)
	if err != nil {
		return err
	}
	resp, err := c.send(ctx, http.MethodPost, "/api/v1/backup", "", nil, 0, pass)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if o.output == "-" {
		_, err := io.Copy(c.stdout, resp.Body)
		return err
	}
	// Written beside the target and renamed once whole: a cut transfer
	// never leaves a file that looks like a backup.
	tmp, err := os.CreateTemp(filepath.Dir(o.output), "."+filepath.Base(o.output)+".part-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, resp.Body)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: the transfer failed after %d bytes (no file written): %w", n, err)
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), o.output); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(map[string]any{"file": o.output, "bytes": n})
	}
	if pass != "" {
		fmt.Fprintf(c.stdout, "backup written to %s (%d bytes); its secrets key is sealed with the passphrase: the restore needs it\n", o.output, n)
		return nil
	}
	fmt.Fprintf(c.stdout, "backup written to %s (%d bytes); it holds the secrets key: keep it as carefully as the appliance\n", o.output, n)
	return nil
}

func cmdRestore(ctx context.Context, c *cli, o *opts, args []string) error {
	if err := nargs(args, 1, 1, "the backup FILE"); err != nil {
		return err
	}
	q := url.Values{}
	if o.keepCredentials {
		q.Set("keep_credentials", "true")
	}
	path := "/api/v1/restore"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	pass, err := readPassphrase(o)
	if err != nil {
		return err
	}
	resp, err := c.upload(ctx, path, args[0], "restore "+filepath.Base(args[0]), pass)
	if err != nil {
		return err
	}
	var res apitypes.RestoreStaged
	if err := decodeAnswer(resp, &res); err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(res)
	}
	fmt.Fprintf(c.stdout, "backup of %s (version %s, %s, %d entries) checked and staged; the daemon restarts to restore it\n",
		orDash(res.ApplianceID), orDash(res.Version), formatTime(res.Created), res.Entries)
	if !o.keepCredentials {
		fmt.Fprintln(c.stdout, "the old appliance's API keys and sessions are not carried: log in with a user of the backup")
	}
	return nil
}

// readPassphrase reads --passphrase-file ("" without one).
func readPassphrase(o *opts) (string, error) {
	if o.passwordFile == "" {
		return "", nil
	}
	b, err := readInput(o.passwordFile)
	if err != nil {
		return "", err
	}
	p := strings.TrimRight(string(b), "\r\n")
	if p == "" {
		return "", fmt.Errorf("passphrase file %s is empty", o.passwordFile)
	}
	return p, nil
}

func cmdLogLevel(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 1, "at most one level"); err != nil {
		return err
	}
	var res apitypes.LogLevel
	var err error
	if len(args) == 0 {
		err = c.do(ctx, http.MethodGet, "/api/v1/log-level", nil, &res)
	} else {
		err = c.do(ctx, http.MethodPut, "/api/v1/log-level", apitypes.LogLevel{Level: args[0]}, &res)
	}
	if err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(res)
	}
	fmt.Fprintln(c.stdout, "log level:", strings.ToLower(res.Level))
	return nil
}

// printFirmware prints the slots' lines of status (health's "firmware"
// member), when the daemon runs on an appliance with slots.
func (c *cli) printFirmware(ctx context.Context) error {
	var h struct {
		Firmware *apitypes.FirmwareStatus `json:"firmware"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/v1/health", nil, &h, http.StatusServiceUnavailable); err != nil {
		return err
	}
	if h.Firmware == nil {
		return nil
	}
	printFirmware(c.stdout, *h.Firmware)
	return nil
}

func printFirmware(w io.Writer, f apitypes.FirmwareStatus) {
	t := newTable(w)
	for _, s := range []string{"a", "b"} {
		info := f.Slots[s]
		var tags []string
		if s == f.Active {
			tags = append(tags, "active")
			if f.Trial {
				tags = append(tags, fmt.Sprintf("on trial, start %d of %d", f.BootCount, f.BootLimit))
			}
		}
		if f.Current != "" && s == f.Current && s != f.Active {
			tags = append(tags, "current")
		}
		if info.Bad {
			tags = append(tags, "rolled back from")
		}
		line := orDash(info.Version)
		if len(tags) > 0 {
			line += " (" + strings.Join(tags, ", ") + ")"
		}
		t.row("slot "+s, line)
	}
	if l := f.Last; l != nil {
		ok := "ok"
		if !l.OK {
			ok = "FAILED"
		}
		t.row("last", fmt.Sprintf("%s %s %s: %s", formatTime(l.Time), l.Action, ok, l.Message))
	}
	if u := f.Upload; u != nil {
		t.row("upload", fmt.Sprintf("%d bytes received since %s", u.Received, formatTime(u.Started)))
	}
	_ = t.flush()
}
