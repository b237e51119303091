// Command qubiq-slot is the appliance's A/B slot agent (docs/appliance.md).
// It is small, rarely changes, and lives outside the slots, at
// /usr/lib/qubiq/qubiq-slot. The unit runs `qubiq-slot boot` as its
// privileged ExecStartPre before every start of qubiqd.
//
//	qubiq-slot boot [flags]            install a pending bundle, count a trial start, roll back, check the schema
//	qubiq-slot status [--json]         the slots, the active one, the last result
//	qubiq-slot install [--force] FILE  check and install a bundle into the inactive slot (on trial)
//	qubiq-slot activate SLOT           make a or b active, not on trial (the package's postinst)
//	qubiq-slot confirm SLOT            end a trial by hand
//	qubiq-slot verify [SLOT]           check a slot's files against its manifest
//	qubiq-slot restore-snapshot        put back the store copy taken before the last upgrade
//	qubiq-slot serial-dropin DEV...    write the unit drop-in that opens serial ports
//
// Common flags: --root (/usr/lib/qubiq), --data-dir (/var/lib/qubiq),
// --trusted-keys (/etc/qubiq/trusted-firmware-keys). Exit status: 0 ok,
// 1 error, 2 usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"qubiq.dev/edge/firmware"
	"qubiq.dev/edge/internal/atomicfile"
	"qubiq.dev/edge/slots"
	"qubiq.dev/edge/systemd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: qubiq-slot COMMAND [flags]
commands: boot, status, install FILE, activate SLOT, confirm SLOT, verify [SLOT], restore-snapshot, serial-dropin DEV...
flags: --root DIR (/usr/lib/qubiq) --data-dir DIR (/var/lib/qubiq) --trusted-keys FILE (/etc/qubiq/trusted-firmware-keys)
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("qubiq-slot "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", slots.DefaultRoot, "slots root `dir` (holds slots/ and current)")
	data := fs.String("data-dir", slots.DefaultDataDir, "data `dir` (slots.json, qubiq.db, firmware/)")
	keys := fs.String("trusted-keys", firmware.DefaultTrustedKeys, "trusted firmware keys `file`")
	limit := fs.Int("boot-limit", slots.DefaultBootLimit, "starts a trial slot may take to confirm health (install)")
	force := fs.Bool("force", false, "install: allow a downgrade")
	asJSON := fs.Bool("json", false, "status: print slots.json")
	reason := fs.String("reason", "activated by hand", "activate: the reason recorded")
	out := fs.String("out", systemd.SerialDropInPath, "serial-dropin: the drop-in `file` to write (- for stdout)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	l := slots.Layout{Root: *root, DataDir: *data}
	logf := func(format string, a ...any) { fmt.Fprintf(stdout, "qubiq-slot: "+format+"\n", a...) }
	fail := func(err error) int {
		fmt.Fprintf(stderr, "qubiq-slot %s: %v\n", cmd, err)
		return 1
	}
	flashOpts := func() (firmware.FlashOptions, error) {
		k, err := firmware.LoadTrustedKeys(*keys)
		return firmware.FlashOptions{Layout: l, Keys: k, Force: *force, BootLimit: *limit}, err
	}
	rest := fs.Args()
	switch cmd {
	case "boot":
		return boot(ctx, l, flashOpts, logf, fail)
	case "status":
		st, err := slots.Load(l)
		if err != nil {
			return fail(err)
		}
		if *asJSON {
			b, _ := json.MarshalIndent(st, "", "  ")
			fmt.Fprintln(stdout, string(b))
			return 0
		}
		printStatus(stdout, l, st)
		return 0
	case "install":
		if len(rest) != 1 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		opts, err := flashOpts()
		if err != nil {
			return fail(err)
		}
		res, err := firmware.Install(ctx, rest[0], opts)
		if err != nil {
			return fail(err)
		}
		logf("version %s installed in slot %s, on trial; restart qubiqd (systemctl restart qubiqd) to start it", res.Version, res.Slot)
		return 0
	case "activate", "confirm":
		if len(rest) != 1 || !slots.ValidSlot(rest[0]) {
			fmt.Fprintf(stderr, "qubiq-slot %s: name the slot: a or b\n", cmd)
			return 2
		}
		if cmd == "activate" {
			if err := slots.Activate(l, rest[0], *reason); err != nil {
				return fail(err)
			}
			logf("slot %s active", rest[0])
			return 0
		}
		ok, err := slots.Confirm(l, rest[0])
		if err != nil {
			return fail(err)
		}
		if !ok {
			logf("slot %s is not on trial: nothing to confirm", rest[0])
		} else {
			logf("slot %s confirmed", rest[0])
		}
		return 0
	case "verify":
		list := rest
		if len(list) == 0 {
			cur, err := slots.CurrentSlot(l)
			if err != nil {
				return fail(err)
			}
			list = []string{cur}
		}
		for _, s := range list {
			if err := firmware.VerifySlot(l, s); err != nil {
				return fail(err)
			}
			logf("slot %s matches its manifest", s)
		}
		return 0
	case "restore-snapshot":
		p, err := slots.RestoreSnapshot(l)
		if err != nil {
			return fail(err)
		}
		logf("store put back from %s (the store it replaced was kept beside it)", p)
		return 0
	case "serial-dropin":
		d, err := systemd.SerialDropIn(rest)
		if err != nil {
			return fail(err)
		}
		if *out == "-" {
			fmt.Fprint(stdout, d)
			return 0
		}
		if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
			return fail(err)
		}
		if err := atomicfile.WriteFile(*out, []byte(d), 0o644); err != nil {
			return fail(err)
		}
		logf("wrote %s; run: systemctl daemon-reload && systemctl restart qubiqd", *out)
		return 0
	}
	fmt.Fprint(stderr, usage)
	return 2
}

// boot is the unit's ExecStartPre. A pending bundle that fails its checks
// is logged and dropped, never stops the start; a damaged state or a store
// schema the active slot does not know does (the message says what to do).
func boot(ctx context.Context, l slots.Layout, flashOpts func() (firmware.FlashOptions, error), logf func(string, ...any), fail func(error) int) int {
	opts, kerr := flashOpts()
	if kerr == nil {
		installed, res, err := firmware.InstallPending(ctx, opts)
		switch {
		case err != nil:
			logf("pending firmware bundle refused and removed: %v", err)
		case installed:
			logf("firmware %s installed in slot %s, starting it on trial", res.Version, res.Slot)
		}
	} else if _, err := os.Stat(filepath.Join(l.DataDir, firmware.StageDir, firmware.PendingFile)); err == nil {
		logf("a firmware bundle is pending but cannot be checked: %v", kerr)
	}
	rep, err := slots.Boot(l, slots.BootOptions{Logf: logf})
	if err != nil {
		var se *slots.SchemaError
		if errors.As(err, &se) {
			logf("refusing to start: %v", err)
		}
		return fail(err)
	}
	state := "confirmed"
	if rep.Trial {
		state = fmt.Sprintf("on trial, start %d", rep.BootCount)
	}
	logf("starting slot %s (%s)", rep.Active, state)
	return 0
}

func printStatus(w io.Writer, l slots.Layout, st slots.State) {
	cur, _ := slots.CurrentSlot(l)
	for _, s := range []string{slots.A, slots.B} {
		info := st.Slots[s]
		var tags []string
		if s == st.Active {
			tags = append(tags, "active")
		}
		if s == cur {
			tags = append(tags, "current")
		}
		if s == st.Active && st.Trial {
			tags = append(tags, fmt.Sprintf("trial %d/%d", st.BootCount, st.BootLimit))
		}
		if info.Bad {
			tags = append(tags, "rolled back from")
		}
		v := info.Version
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(w, "slot %s  %-14s %s\n", s, v, strings.Join(tags, ", "))
	}
	if st.Last != nil {
		ok := "ok"
		if !st.Last.OK {
			ok = "FAILED"
		}
		fmt.Fprintf(w, "last: %s %s %s: %s\n", st.Last.Time.Format("2006-01-02 15:04:05Z07:00"), st.Last.Action, ok, st.Last.Message)
	}
}
