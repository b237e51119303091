package main

import (
	"context"
	"fmt"

	"qubiq.dev/edge/api/apitypes"
)

// The certificate commands of OPC UA devices (DESIGN.md, "Binaries":
// devices certs list|trust|reject; issue 6): `devices certs list DEVICE`,
// `devices certs trust DEVICE THUMBPRINT`, `devices certs reject DEVICE
// THUMBPRINT`. "devices certs" is one command whose first argument is the
// action, so the two-word command lookup of main.go serves it.
func init() {
	groups["devices"] = append(groups["devices"], "certs")
	commands["devices certs"] = command{name: "devices certs",
		args: "list DEVICE | trust DEVICE THUMBPRINT | reject DEVICE THUMBPRINT",
		help: "List an OPC UA device's certificates (trusted, rejected, qubiqd's own), or trust or reject a server certificate by its thumbprint (audited; the device reconnects at once).",
		run:  cmdDevicesCerts}
}

func cmdDevicesCerts(ctx context.Context, c *cli, _ *opts, args []string) error {
	if len(args) == 0 {
		return usagef("devices certs: missing action (list, trust or reject)")
	}
	action, rest := args[0], args[1:]
	switch action {
	case "list":
		if err := nargs(rest, 1, 1, "list DEVICE"); err != nil {
			return err
		}
		certs, err := c.c.ListDeviceCerts(ctx, rest[0])
		if err != nil {
			return err
		}
		if c.g.json {
			return c.printJSON(certs)
		}
		t := newTable(c.stdout, "THUMBPRINT", "STATUS", "SUBJECT", "NOT_BEFORE", "NOT_AFTER", "EXPIRED")
		for _, ct := range certs {
			t.row(ct.Thumbprint, ct.Status, ct.Subject, formatTime(ct.NotBefore), formatTime(ct.NotAfter), yesNo(ct.Expired))
		}
		return t.flush()
	case "trust", "reject":
		if err := nargs(rest, 2, 2, action+" DEVICE THUMBPRINT"); err != nil {
			return err
		}
		move := c.c.TrustDeviceCert
		if action == "reject" {
			move = c.c.RejectDeviceCert
		}
		ct, err := move(ctx, rest[0], rest[1])
		if err != nil {
			return err
		}
		if c.g.json {
			return c.printJSON(ct)
		}
		verb := map[string]string{apitypes.CertTrusted: "trusted", apitypes.CertRejected: "rejected"}[ct.Status]
		fmt.Fprintf(c.stdout, "%s %s (%s) for device %s\n", orDash(verb), ct.Thumbprint, ct.Subject, rest[0])
		return nil
	}
	return usagef("devices certs: unknown action %q (want list, trust or reject)", action)
}
