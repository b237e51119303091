package main

import (
	"context"
	"flag"
	"fmt"

	"qubiq.dev/edge/firmware/qfw"
)

// A release manager's tools for firmware bundles (docs/appliance.md,
// "Signing keys"): a signing key pair, and the signature of a built bundle.
// Neither talks to a daemon; the private key never leaves this machine.

func init() {
	commands["firmware keygen"] = command{name: "firmware keygen", args: "NAME --key FILE",
		help: "Make an ed25519 firmware signing key named NAME: the private key goes to FILE (mode 0600, never overwritten), the line for an appliance's /etc/qubiq/trusted-firmware-keys to FILE.pub and to the output.",
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.StringVar(&o.fwKey, "key", "", "file for the private key; must not exist")
		}, run: cmdFirmwareKeygen}
	commands["firmware sign"] = command{name: "firmware sign", args: "BUNDLE.qfw --key FILE [-o OUT.qfw]",
		help: "Sign a firmware bundle with the key in FILE after checking every file's hash against its manifest: BUNDLE is replaced atomically, or the signed bundle is written to OUT.",
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.StringVar(&o.fwKey, "key", "", "private key file from firmware keygen")
			fs.StringVar(&o.fwOut, "o", "", "write the signed bundle here instead of replacing BUNDLE")
		}, run: cmdFirmwareSign}
}

func cmdFirmwareKeygen(_ context.Context, c *cli, o *opts, args []string) error {
	if err := nargs(args, 1, 1, "the key's NAME"); err != nil {
		return err
	}
	if o.fwKey == "" {
		return usagef("--key FILE is required (the private key is never printed)")
	}
	line, err := qfw.KeygenFile(args[0], o.fwKey)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "private key %s (keep it secret); the trusted-keys line, also in %s.pub:\n%s", o.fwKey, o.fwKey, line)
	return nil
}

func cmdFirmwareSign(_ context.Context, c *cli, o *opts, args []string) error {
	if err := nargs(args, 1, 1, "the BUNDLE.qfw to sign"); err != nil {
		return err
	}
	if o.fwKey == "" {
		return usagef("--key FILE is required")
	}
	m, err := qfw.SignFile(args[0], o.fwOut, o.fwKey)
	if err != nil {
		return err
	}
	out := o.fwOut
	if out == "" {
		out = args[0]
	}
	fmt.Fprintf(c.stdout, "%s: version %s (%s), %d files, signed\n", out, m.Version, m.Arch, len(m.Files))
	return nil
}
