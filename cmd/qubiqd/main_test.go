package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRun_Usage: a stray argument and an unknown flag are usage errors
// (exit 2) that say what is wrong; --help is not an error.
func TestRun_Usage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--bogus"}, 2, "usage: qubiqd [--config FILE]"},
		{[]string{"--help"}, 0, "--check-config"},
		{[]string{"--log-level", "verbose"}, 2, "want debug, info, warn or error"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.want) {
			t.Errorf("qubiqd %v: exit %d, output %q; want exit %d mentioning %q", tc.args, code, out.String()+errb.String(), tc.code, tc.want)
		}
	}
}
