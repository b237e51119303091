package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
)

var auditFlags struct {
	after  uint64
	limit  int
	result string
}

// The audit command (docs/security.md, "The audit log"): lists the audit log,
// oldest first, over GET /api/v1/audit (permission users_admin).
func init() {
	commands["audit"] = command{name: "audit", args: "[--after SEQ] [--limit N] [--result RESULT]",
		help: "List audit records after sequence number SEQ (default 0), at most N (default 100); --result keeps those with that result (ok, script_error, timeout, permission_denied, refused, unauthenticated, ...).",
		flags: func(fs *flag.FlagSet, _ *opts) {
			fs.Uint64Var(&auditFlags.after, "after", 0, "list records after this sequence number")
			fs.IntVar(&auditFlags.limit, "limit", 100, "list at most this many records (1 to 10000)")
			fs.StringVar(&auditFlags.result, "result", "", "list only records with this result (ok, script_error, timeout, ...)")
		}, run: cmdAudit}
}

func cmdAudit(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	recs, err := c.c.AuditRecords(ctx, auditFlags.after, auditFlags.limit, auditFlags.result)
	if err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(recs)
	}
	t := newTable(c.stdout, "SEQ", "TIME", "PRINCIPAL", "ORIGIN", "ACTION", "TARGET", "RESULT", "DETAIL")
	for _, r := range recs {
		detail := r.Detail
		if detail == "" && len(r.After) > 0 {
			detail = "after=" + string(r.After)
		}
		t.row(fmt.Sprint(r.Seq), r.Time.UTC().Format("2006-01-02T15:04:05.000Z"), r.Principal, r.Origin, r.Action, r.Target,
			r.Result, strings.ReplaceAll(detail, "\n", " "))
	}
	return t.flush()
}
