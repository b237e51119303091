package main

import (
	"context"
	"fmt"

	"qubiq.dev/edge/api/apitypes"
)

// The certificate commands of OPC UA devices (docs/opcua.md, "Certificates
// and trust"): `devices certs list DEVICE`, `devices certs trust DEVICE
// THUMBPRINT`, `devices certs reject DEVICE THUMBPRINT` (permission
// designer; trust and reject are audited).
func init() {
	commands["devices certs list"] = command{name: "devices certs list", args: "DEVICE",
		help: "List an OPC UA device's certificate store: qubiqd's own certificate, the trusted and the rejected server certificates, with thumbprint (SHA-1), subject and validity.",
		run:  cmdCertsList, complete: completeDevices("opcua")}
	commands["devices certs trust"] = command{name: "devices certs trust", args: "DEVICE THUMBPRINT",
		help: "Trust a rejected server certificate by its thumbprint: it moves to pki/trusted and the device connects with it at once (audited).",
		run:  cmdCertsMove("trust"), complete: completeDevices("opcua")}
	commands["devices certs reject"] = command{name: "devices certs reject", args: "DEVICE THUMBPRINT",
		help: "Reject a trusted server certificate by its thumbprint: it moves to pki/rejected and the next connection refuses the server (audited).",
		run:  cmdCertsMove("reject"), complete: completeDevices("opcua")}
}

func cmdCertsList(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "DEVICE"); err != nil {
		return err
	}
	certs, err := c.c.ListDeviceCerts(ctx, args[0])
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
}

func cmdCertsMove(action string) func(ctx context.Context, c *cli, _ *opts, args []string) error {
	return func(ctx context.Context, c *cli, _ *opts, args []string) error {
		if err := nargs(args, 2, 2, "DEVICE THUMBPRINT"); err != nil {
			return err
		}
		move := c.c.TrustDeviceCert
		if action == "reject" {
			move = c.c.RejectDeviceCert
		}
		ct, err := move(ctx, args[0], args[1])
		if err != nil {
			return err
		}
		if c.g.json {
			return c.printJSON(ct)
		}
		verb := map[string]string{apitypes.CertTrusted: "trusted", apitypes.CertRejected: "rejected"}[ct.Status]
		fmt.Fprintf(c.stdout, "%s %s (%s) for device %s\n", orDash(verb), ct.Thumbprint, ct.Subject, args[0])
		return nil
	}
}
