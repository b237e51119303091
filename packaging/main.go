// Command packaging builds what a technician installs and flashes
// (docs/appliance.md): the private Python runtime, the slot tree, the .deb
// (with nfpm as a Go module, github.com/goreleaser/nfpm/v2) and the signed
// firmware bundle. `make package` and `make bundle` run it:
//
//	go run ./packaging runtime --out DIR
//	go run ./packaging package --version V [--arch A] [--runtime DIR] [--out DIR] [--trusted-keys FILE]
//	go run ./packaging bundle  --version V [--arch A] [--out DIR] --key FILE [--min-from V] [--slot DIR] [--schema N]
//	go run ./packaging keygen NAME --out FILE
//
// package builds qubiqd, qubiqctl and qubiq-slot (static, GOARCH=A), the
// runtime (for the host's architecture, unless --runtime names one built
// on an A machine), the slot tree <out>/slot-A and <out>/qubiq_V_A.deb.
// bundle packs <out>/slot-A (built by package) into
// <out>/qubiq-V-A.qfw, signed with the key.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"qubiq.dev/edge/firmware"
	"qubiq.dev/edge/slots"
	"qubiq.dev/edge/store"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "packaging:", err)
		os.Exit(1)
	}
}

// options are the flags of every command.
type options struct {
	Version, Arch, Out, Runtime, TrustedKeys, Key, MinFrom, Repo, Slot string
	Schema                                                             uint64
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: packaging runtime|package|bundle|keygen|sign [flags]")
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	var o options
	fs.StringVar(&o.Version, "version", "", "firmware `version` (semantic: 1.2.3)")
	fs.StringVar(&o.Arch, "arch", runtime.GOARCH, "target GOARCH (amd64, arm64)")
	fs.StringVar(&o.Out, "out", "build/package", "output `dir`")
	fs.StringVar(&o.Runtime, "runtime", "", "a private Python runtime `dir` built for --arch (default: build one for this machine)")
	fs.StringVar(&o.TrustedKeys, "trusted-keys", "packaging/keys/dev-firmware-signing.pub", "the trusted-firmware-keys `file` the package ships")
	fs.StringVar(&o.Key, "key", "", "signing key `file` (bundle, keygen output)")
	fs.StringVar(&o.MinFrom, "min-from", "", "bundle: lowest running `version` it may be flashed over")
	fs.StringVar(&o.Repo, "repo", ".", "the repository's root `dir`")
	fs.StringVar(&o.Slot, "slot", "", "bundle: the slot tree `dir` (default <out>/slot-<arch>, built by package)")
	fs.Uint64Var(&o.Schema, "schema", store.SchemaVersion, "bundle: the store schema `version` its daemon writes")
	var keyName string
	if (cmd == "keygen" || cmd == "sign") && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		keyName, args = args[0], args[1:] // sign: the bundle
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch cmd {
	case "runtime":
		m, err := buildRuntime(o.Out, "/usr/bin/python3.11")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "runtime %s (Python %s, %d files) in %s; depends: %s\n", o.Arch, m.Python, len(m.Files), o.Out, strings.Join(m.Depends, ", "))
		return nil
	case "package":
		deb, err := makePackage(o)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, deb)
		return nil
	case "bundle":
		qfw, err := makeBundle(o)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, qfw)
		return nil
	case "keygen":
		if keyName == "" || o.Key == "" {
			return errors.New("usage: packaging keygen NAME --key FILE (writes FILE and FILE.pub)")
		}
		priv, pub, err := firmware.Keygen(keyName, nil)
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.Key, priv, 0o600); err != nil {
			return err
		}
		if err := os.WriteFile(o.Key+".pub", pub, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "private key %s (keep it secret), trusted-keys line in %s.pub:\n%s", o.Key, o.Key, pub)
		return nil
	case "sign":
		// A release manager signs a bundle built elsewhere with the
		// production key, in place (every hash is checked first).
		if keyName == "" || o.Key == "" {
			return errors.New("usage: packaging sign BUNDLE.qfw --key FILE (re-signs BUNDLE in place)")
		}
		m, err := firmware.SignFile(keyName, "", o.Key)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: version %s (%s) signed\n", keyName, m.Version, m.Arch)
		return nil
	}
	return fmt.Errorf("unknown command %q", cmd)
}

func checkVersion(v string) error {
	if v == "" {
		return errors.New("--version is required (semantic: 1.2.3)")
	}
	if _, err := firmware.CompareVersions(v, v); err != nil {
		return fmt.Errorf("--version: %w", err)
	}
	return nil
}

// makePackage builds the binaries, the runtime, the slot tree and the .deb;
// it returns the .deb's path.
func makePackage(o options) (string, error) {
	if err := checkVersion(o.Version); err != nil {
		return "", err
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return "", err
	}
	repo, _ := filepath.Abs(o.Repo)
	binDir := filepath.Join(out, "bin-"+o.Arch)
	for _, c := range []string{"qubiqd", "qubiqctl", "qubiq-slot"} {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X qubiq.dev/edge/daemon.Version="+o.Version,
			"-o", filepath.Join(binDir, c), "./cmd/"+c)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch)
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", c, err, b)
		}
	}
	rt := o.Runtime
	if rt == "" {
		if o.Arch != runtime.GOARCH {
			return "", fmt.Errorf("--arch %s: give --runtime, a runtime directory built on an %s machine (`go run ./packaging runtime`)", o.Arch, o.Arch)
		}
		rt = filepath.Join(out, "runtime-"+o.Arch)
		if _, err := buildRuntime(rt, "/usr/bin/python3.11"); err != nil {
			return "", fmt.Errorf("runtime: %w", err)
		}
	}
	var rm RuntimeManifest
	b, err := os.ReadFile(filepath.Join(rt, RuntimeManifestName))
	if err == nil {
		err = json.Unmarshal(b, &rm)
	}
	if err != nil {
		return "", fmt.Errorf("runtime %s: %s: %w", rt, RuntimeManifestName, err)
	}
	if rm.Arch != o.Arch {
		return "", fmt.Errorf("runtime %s is for %s, not %s", rt, rm.Arch, o.Arch)
	}
	slot := filepath.Join(out, "slot-"+o.Arch)
	if err := os.RemoveAll(slot); err != nil {
		return "", err
	}
	for _, c := range []string{"qubiqd", "qubiqctl"} {
		if err := copyFile(filepath.Join(binDir, c), filepath.Join(slot, "bin", c)); err != nil {
			return "", err
		}
	}
	if err := copyTree(rt, filepath.Join(slot, "python"), nil); err != nil {
		return "", err
	}
	created := time.Now().UTC().Truncate(time.Second)
	_, raw, err := firmware.SlotManifest(firmware.BuildOptions{SlotDir: slot, Version: o.Version, Arch: o.Arch,
		SchemaVersion: store.SchemaVersion, Created: created})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(slot, slots.ManifestFile), raw, 0o644); err != nil {
		return "", err
	}
	deb := filepath.Join(out, fmt.Sprintf("qubiq_%s_%s.deb", o.Version, o.Arch))
	keys := o.TrustedKeys
	if !filepath.IsAbs(keys) {
		keys = filepath.Join(repo, keys)
	}
	err = buildDeb(debOptions{Version: o.Version, Arch: o.Arch, SlotDir: slot, SlotAgent: filepath.Join(binDir, "qubiq-slot"),
		Unit: filepath.Join(repo, "systemd/qubiqd.service"), Config: filepath.Join(repo, "packaging/qubiq.yaml"),
		TrustedKeys: keys, Doc: filepath.Join(repo, "docs/appliance.md"), ScriptsDir: filepath.Join(repo, "packaging/scripts"),
		Depends: rm.Depends, Out: deb, MTime: created})
	return deb, err
}

// makeBundle packs the slot tree makePackage built into a signed bundle.
func makeBundle(o options) (string, error) {
	if err := checkVersion(o.Version); err != nil {
		return "", err
	}
	if o.Key == "" {
		return "", errors.New("--key is required (packaging/keys/dev-firmware-signing.key for development)")
	}
	key, err := firmware.LoadSigningKey(o.Key)
	if err != nil {
		return "", err
	}
	slot := o.Slot
	if slot == "" {
		slot = filepath.Join(o.Out, "slot-"+o.Arch)
		mb, err := os.ReadFile(filepath.Join(slot, slots.ManifestFile))
		if err != nil {
			return "", fmt.Errorf("%s: run `package` first: %w", slot, err)
		}
		var sm struct{ Version string }
		json.Unmarshal(mb, &sm)
		if sm.Version != o.Version {
			return "", fmt.Errorf("%s holds version %s, not %s: run `package --version %s` first", slot, sm.Version, o.Version, o.Version)
		}
	}
	path := filepath.Join(o.Out, firmware.BundleName(o.Version, o.Arch))
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return "", err
	}
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	_, err = firmware.Build(f, firmware.BuildOptions{SlotDir: slot, Version: o.Version, Arch: o.Arch, MinFromVersion: o.MinFrom,
		SchemaVersion: o.Schema, Key: key})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", err
	}
	return path, nil
}
