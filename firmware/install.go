package firmware

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"qubiq.dev/edge/firmware/qfw"
	"runtime"
	"time"

	"qubiq.dev/edge/internal/atomicfile"
	"qubiq.dev/edge/slots"
)

// DefaultMaxSize bounds an uploaded bundle (bytes, compressed).
const DefaultMaxSize = 1 << 30

// Where Flash stages a verified bundle for qubiq-slot, under the data dir.
const (
	StageDir    = "firmware"
	PendingFile = "pending.qfw"
	PendingMeta = "pending.json"
)

// crashAt is a test hook: the power-cut tests kill the process at named
// points of a flash. It does nothing otherwise.
var crashAt = func(point string) {}

// FlashOptions configures Flash and Install.
type FlashOptions struct {
	Layout slots.Layout
	// Keys are the trusted firmware keys (LoadTrustedKeys of
	// /etc/qubiq/trusted-firmware-keys). Required.
	Keys TrustedKeys
	// Arch is the appliance's architecture (zero: runtime.GOARCH).
	Arch string
	// RunningVersion is the version flashed over (zero: the active slot's,
	// from slots.json). Unknown, no downgrade check can be made.
	RunningVersion string
	// Force allows a downgrade and a running version below the bundle's
	// min_from_version. Never another architecture.
	Force bool
	// MaxSize bounds the bundle's bytes (zero: DefaultMaxSize).
	MaxSize int64
	// Progress, if set, is called with the bytes received so far, at most
	// every 256 KiB and at the end.
	Progress func(received int64)
	// BootLimit is the trial's number of starts (zero: 3); Install only.
	BootLimit int
}

// Result describes an accepted bundle.
type Result struct {
	Version string `json:"version"`
	Arch    string `json:"arch"`
	Key     string `json:"key"`
	Slot    string `json:"slot"` // the slot it goes (or went) into
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256"`
	Forced  bool   `json:"forced,omitempty"`
	// Pending is the staged bundle's path (Flash): qubiq-slot installs it
	// at the daemon's next start. RestartRequired says the daemon should
	// exit (status 75) now.
	Pending         string `json:"pending,omitempty"`
	RestartRequired bool   `json:"restart_required"`
	Previous        string `json:"previous_version,omitempty"`
}

type pendingMeta struct {
	SHA256   string    `json:"sha256"`
	Version  string    `json:"version"`
	Force    bool      `json:"force"`
	Received time.Time `json:"received"`
}

// Flash is the daemon's half of a flash (POST /api/v1/firmware calls it
// with the request body). It streams r with opts.MaxSize and
// opts.Progress, checks the manifest's signature against opts.Keys before
// it writes a byte, refuses another architecture always and a downgrade
// unless forced, then spools the rest into <data_dir>/firmware while every
// file's hash is checked, and stages the bundle as pending. It records the
// outcome, accepted or refused, in slots.json (the last result `qubiqctl
// status` shows).
//
// On success the daemon should exit with status 75 so that systemd restarts
// it; qubiq-slot installs the bundle first (InstallPending). A refused
// bundle leaves the slots, current and any earlier pending bundle as they
// were. Errors wrap ErrUnknownKey, ErrSignature, ErrHash, ErrFormat,
// ErrArch, ErrDowngrade, ErrUpgradePath, ErrTooLarge or ErrBusy (a slot on
// trial), and name what was wrong.
func Flash(ctx context.Context, r io.Reader, opts FlashOptions) (Result, error) {
	res, err := flash(ctx, r, &opts)
	record(opts.Layout, "flash", res, err)
	return res, err
}

func flash(ctx context.Context, r io.Reader, opts *FlashOptions) (Result, error) {
	st, err := prepare(opts)
	if err != nil {
		return Result{}, err
	}
	stage := filepath.Join(opts.Layout.DataDir, StageDir)
	in := &intake{ctx: ctx, r: r, max: opts.MaxSize, progress: opts.Progress, sum: sha256.New()}
	br, err := qfw.OpenReader(in, opts.Keys)
	if err != nil {
		return Result{}, err
	}
	res := Result{Version: br.Manifest().Version, Arch: br.Manifest().Arch, Key: br.Key(), Slot: slots.Other(st.Active), Forced: opts.Force}
	if err := admit(br.Manifest(), st, opts, &res); err != nil {
		return res, err
	}
	// Signed, for this appliance: from here on the bytes are spooled.
	_, statErr := os.Stat(stage)
	made := errors.Is(statErr, fs.ErrNotExist)
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return res, fmt.Errorf("firmware: %w", err)
	}
	tmp, err := os.CreateTemp(stage, ".incoming-*.qfw")
	if err != nil {
		return res, fmt.Errorf("firmware: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
		if made {
			os.Remove(stage) // only when empty: a refused bundle leaves no trace
		}
	}()
	if err := in.spoolTo(tmp); err != nil {
		return res, err
	}
	crashAt("flash-spooling")
	if err := br.Each(func(*File, io.Reader) error { return nil }); err != nil {
		return res, err
	}
	if err := br.Drain(); err != nil {
		return res, err
	}
	if err := in.finish(); err != nil {
		return res, err
	}
	res.Size, res.SHA256 = in.n, hex.EncodeToString(in.sum.Sum(nil))
	if err := tmp.Sync(); err != nil {
		return res, fmt.Errorf("firmware: %w", err)
	}
	crashAt("flash-spooled")
	meta, _ := json.Marshal(pendingMeta{SHA256: res.SHA256, Version: res.Version, Force: opts.Force, Received: time.Now().UTC()})
	// The metadata first, then the bundle: a pending.qfw is never without
	// its pending.json (a stale pending.json alone is ignored).
	if err := atomicfile.WriteFile(filepath.Join(stage, PendingMeta), meta, 0o600); err != nil {
		return res, err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(stage, PendingFile)); err != nil {
		return res, fmt.Errorf("firmware: %w", err)
	}
	if err := slots.SyncDir(stage); err != nil {
		return res, err
	}
	res.Pending, res.RestartRequired = filepath.Join(stage, PendingFile), true
	return res, nil
}

// prepare fills opts' defaults and refuses a flash while a slot is on
// trial: its previous slot is the only one known to boot.
func prepare(opts *FlashOptions) (slots.State, error) {
	if opts.Arch == "" {
		opts.Arch = runtime.GOARCH
	}
	if opts.MaxSize <= 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if len(opts.Keys) == 0 {
		return slots.State{}, fmt.Errorf("%w: no trusted firmware keys", ErrUnknownKey)
	}
	st, err := slots.Load(opts.Layout)
	if err != nil {
		return st, err
	}
	if st.Trial {
		return st, fmt.Errorf("%w: slot %s (version %s) is on trial; wait until it is confirmed healthy or rolled back", ErrBusy, st.Active, st.Slots[st.Active].Version)
	}
	if opts.RunningVersion == "" {
		opts.RunningVersion = st.Slots[st.Active].Version
	}
	return st, nil
}

// admit applies the architecture and version rules to a signed manifest.
func admit(m *Manifest, st slots.State, opts *FlashOptions, res *Result) error {
	if m.Arch != opts.Arch {
		return fmt.Errorf("%w: the bundle is for %s, this appliance is %s (never flashed, forced or not)", ErrArch, m.Arch, opts.Arch)
	}
	res.Previous = opts.RunningVersion
	if opts.RunningVersion == "" {
		return nil
	}
	if qfw.ValidVersion(opts.RunningVersion) != nil {
		return nil // a development build: nothing to compare with
	}
	if c, _ := CompareVersions(m.Version, opts.RunningVersion); c < 0 && !opts.Force {
		return fmt.Errorf("%w: bundle %s is older than the running %s (flash with force to downgrade)", ErrDowngrade, m.Version, opts.RunningVersion)
	}
	if m.MinFromVersion != "" {
		if c, _ := CompareVersions(opts.RunningVersion, m.MinFromVersion); c < 0 && !opts.Force {
			return fmt.Errorf("%w: bundle %s upgrades from %s or later, the running version is %s (flash %s first)", ErrUpgradePath, m.Version, m.MinFromVersion, opts.RunningVersion, m.MinFromVersion)
		}
	}
	return nil
}

// intake reads the upload: context, size limit, progress, whole-stream
// hash, and (once spoolTo is called) a copy of every byte to the spool,
// beginning with those read before.
type intake struct {
	ctx      context.Context
	r        io.Reader
	max, n   int64
	lastProg int64
	progress func(int64)
	sum      hash.Hash
	head     bytes.Buffer // bytes read before the spool exists
	spool    io.Writer
}

func (in *intake) Read(p []byte) (int, error) {
	if err := in.ctx.Err(); err != nil {
		return 0, err
	}
	if rest := in.max - in.n + 1; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := in.r.Read(p)
	in.n += int64(n)
	if in.n > in.max {
		return 0, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, in.max)
	}
	in.sum.Write(p[:n])
	if in.spool != nil {
		if _, werr := in.spool.Write(p[:n]); werr != nil {
			return 0, fmt.Errorf("firmware: spool: %w", werr)
		}
	} else {
		in.head.Write(p[:n])
	}
	if in.progress != nil && in.n-in.lastProg >= 256<<10 {
		in.lastProg = in.n
		in.progress(in.n)
	}
	return n, err
}

func (in *intake) spoolTo(w io.Writer) error {
	if _, err := w.Write(in.head.Bytes()); err != nil {
		return fmt.Errorf("firmware: spool: %w", err)
	}
	in.head = bytes.Buffer{}
	in.spool = w
	return nil
}

// finish reads whatever follows the bundle's end (nothing may), and
// reports the final progress.
func (in *intake) finish() error {
	var b [1]byte
	for {
		n, err := in.Read(b[:])
		if n > 0 {
			return fmt.Errorf("%w: data after the end of the bundle", ErrFormat)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if in.progress != nil {
		in.progress(in.n)
	}
	return nil
}

// record saves the outcome in slots.json's history.
func record(l slots.Layout, action string, res Result, err error) {
	st, lerr := slots.Load(l)
	if lerr != nil {
		return
	}
	r := slots.Result{Action: action, Slot: res.Slot, Version: res.Version, OK: err == nil}
	switch {
	case err != nil:
		r.Action, r.Message = "refuse", action+" refused: "+err.Error()
	case action == "flash":
		r.Message = fmt.Sprintf("bundle %s (key %s) verified and staged for slot %s; installed at the next start", res.Version, res.Key, res.Slot)
	default:
		return // Install's success is recorded by slots.BeginTrial
	}
	st.Record(r)
	_ = slots.Save(l, st)
}

// Install is qubiq-slot's half: it checks the bundle at path again (the
// daemon's check is not trusted: signature, hashes, architecture and
// versions against opts), unpacks it into <root>/slots/.<slot>.new, fsyncs
// every file and directory, swaps it in by renames, puts it on trial and
// switches current (slots.BeginTrial). A kill at any point leaves current
// on a complete slot: until the last rename the active slot is untouched,
// and slots.Boot completes a switch cut short.
func Install(ctx context.Context, path string, opts FlashOptions) (Result, error) {
	res, err := install(ctx, path, &opts)
	record(opts.Layout, "install", res, err)
	return res, err
}

func install(ctx context.Context, path string, opts *FlashOptions) (Result, error) {
	st, err := prepare(opts)
	if err != nil {
		return Result{}, err
	}
	open := func() (*os.File, *qfw.Reader, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, fmt.Errorf("firmware: %w", err)
		}
		br, err := qfw.OpenReader(&intake{ctx: ctx, r: f, max: opts.MaxSize, sum: sha256.New(), spool: io.Discard}, opts.Keys)
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		return f, br, nil
	}
	f, br, err := open()
	if err != nil {
		return Result{}, err
	}
	res := Result{Version: br.Manifest().Version, Arch: br.Manifest().Arch, Key: br.Key(), Slot: slots.Other(st.Active), Forced: opts.Force}
	err = admit(br.Manifest(), st, opts, &res)
	if err == nil {
		err = br.Each(func(*File, io.Reader) error { return nil })
	}
	f.Close()
	if err != nil {
		return res, err
	}
	if res.SHA256, err = qfw.HashFile(path); err != nil {
		return res, err
	}
	if fi, err := os.Stat(path); err == nil {
		res.Size = fi.Size()
	}
	// Verified: unpack into the staging directory beside the slot.
	l := opts.Layout
	slotsDir := filepath.Join(l.Root, "slots")
	staging := filepath.Join(slotsDir, "."+res.Slot+".new")
	old := filepath.Join(slotsDir, "."+res.Slot+".old")
	for _, d := range []string{staging, old} {
		if err := os.RemoveAll(d); err != nil {
			return res, fmt.Errorf("firmware: clear %s: %w", d, err)
		}
	}
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return res, fmt.Errorf("firmware: %w", err)
	}
	f, br, err = open()
	if err != nil {
		return res, err
	}
	defer f.Close()
	var dirs []string
	count := 0
	err = br.Each(func(e *File, r io.Reader) error {
		count++
		if count == len(br.Manifest().Files)/2 {
			crashAt("install-unpacking")
		}
		return unpack(staging, e, r, &dirs)
	})
	if err != nil {
		os.RemoveAll(staging)
		return res, err
	}
	raw, sig := br.ManifestBytes()
	if err := writeSynced(filepath.Join(staging, slots.ManifestFile), raw, 0o644); err != nil {
		return res, err
	}
	if err := writeSynced(filepath.Join(staging, qfw.EntrySig), sig, 0o644); err != nil {
		return res, err
	}
	// Modes as the manifest says, whatever the umask (the unit's is 0077,
	// and qubiq-slot inherits it): directories 0755, so that the daemon's
	// user can reach its own slot.
	err = filepath.WalkDir(staging, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = os.Chmod(p, 0o755)
		}
		return err
	})
	if err != nil {
		return res, fmt.Errorf("firmware: %w", err)
	}
	for _, d := range append(dirs, staging, slotsDir) {
		if err := slots.SyncDir(d); err != nil {
			return res, err
		}
	}
	crashAt("install-unpacked")
	target := l.SlotDir(res.Slot)
	if err := os.Rename(target, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return res, fmt.Errorf("firmware: %w", err)
	}
	crashAt("install-old-moved")
	if err := os.Rename(staging, target); err != nil {
		return res, fmt.Errorf("firmware: %w", err)
	}
	if err := slots.SyncDir(slotsDir); err != nil {
		return res, err
	}
	crashAt("install-new-in-place")
	if err := os.RemoveAll(old); err != nil {
		return res, fmt.Errorf("firmware: %w", err)
	}
	info := slots.SlotInfo{Version: br.Manifest().Version, Arch: br.Manifest().Arch, SchemaVersion: br.Manifest().SchemaVersion, Bundle: res.SHA256}
	if err := slots.BeginTrial(l, res.Slot, info, opts.BootLimit); err != nil {
		return res, err
	}
	crashAt("install-switched")
	return res, nil
}

// unpack writes one verified entry into the staging directory.
func unpack(root string, e *File, r io.Reader, dirs *[]string) error {
	dst := filepath.Join(root, filepath.FromSlash(e.Path))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("firmware: %w", err)
	}
	switch {
	case e.Dir:
		*dirs = append(*dirs, dst)
		return os.MkdirAll(dst, 0o755)
	case e.Link != "":
		return os.Symlink(e.Link, dst)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fs.FileMode(e.Mode))
	if err != nil {
		return fmt.Errorf("firmware: %w", err)
	}
	_, werr := io.Copy(out, r)
	serr := out.Sync()
	cerr := out.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("firmware: unpack %s: %w", e.Path, err)
	}
	return os.Chmod(dst, fs.FileMode(e.Mode)) // past the umask
}

func writeSynced(path string, b []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("firmware: %w", err)
	}
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("firmware: write %s: %w", path, err)
	}
	return os.Chmod(path, mode)
}

// InstallPending installs the bundle Flash staged, if any (qubiq-slot boot
// calls it before slots.Boot). It returns whether one was installed. A
// pending bundle that fails its checks is removed and the refusal recorded:
// it never blocks the start of the slot that runs. A bundle already
// installed (a kill after BeginTrial, before the removal) is only removed.
func InstallPending(ctx context.Context, opts FlashOptions) (bool, Result, error) {
	stage := filepath.Join(opts.Layout.DataDir, StageDir)
	path := filepath.Join(stage, PendingFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		os.Remove(filepath.Join(stage, PendingMeta))
		return false, Result{}, nil
	}
	var meta pendingMeta
	if b, err := os.ReadFile(filepath.Join(stage, PendingMeta)); err == nil {
		_ = json.Unmarshal(b, &meta)
	}
	clear := func() {
		os.Remove(path)
		os.Remove(filepath.Join(stage, PendingMeta))
		os.Remove(stage) // when empty
		_ = slots.SyncDir(opts.Layout.DataDir)
	}
	if st, err := slots.Load(opts.Layout); err == nil && meta.SHA256 != "" && st.Slots[st.Active].Bundle == meta.SHA256 {
		clear()
		return false, Result{}, nil
	}
	opts.Force = opts.Force || meta.Force
	res, err := Install(ctx, path, opts)
	clear()
	if err != nil {
		return false, res, err
	}
	return true, res, nil
}

// VerifySlot checks an installed slot against the manifest.json installed
// with it: every file's size, mode and SHA-256, every link and directory
// (qubiq-slot verify; the power-cut tests). Extra files are not errors.
func VerifySlot(l slots.Layout, slot string) error {
	dir := l.SlotDir(slot)
	raw, err := os.ReadFile(filepath.Join(dir, slots.ManifestFile))
	if err != nil {
		return fmt.Errorf("firmware: slot %s: %w", slot, err)
	}
	m, err := qfw.ParseManifest(raw)
	if err != nil {
		return fmt.Errorf("firmware: slot %s: %w", slot, err)
	}
	var errs []error
	for _, f := range m.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			errs = append(errs, err)
		case f.Dir:
			if !fi.IsDir() {
				errs = append(errs, fmt.Errorf("%s: not a directory", f.Path))
			}
		case f.Link != "":
			if t, err := os.Readlink(p); err != nil || t != f.Link {
				errs = append(errs, fmt.Errorf("%s: link %q, want %q", f.Path, t, f.Link))
			}
		default:
			sum, err := qfw.HashFile(p)
			if err != nil || sum != f.SHA256 || fi.Size() != f.Size || uint32(fi.Mode().Perm()) != f.Mode {
				errs = append(errs, fmt.Errorf("%s: %w", f.Path, ErrHash))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("firmware: slot %s (version %s): %w", slot, m.Version, err)
	}
	return nil
}
