package gateway

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"qubiq.dev/edge/auth"
)

func TestCheckName_OneRuleForModulesAndEntries(t *testing.T) {
	for _, ok := range []string{"pumps", "P1", "a_b_9", strings.Repeat("x", 64)} {
		if err := CheckName("module", ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "_x", "9a", "a.b", "a-b", "ä", strings.Repeat("x", 65)} {
		if err := CheckName("entry", bad); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "entry "+fmt.Sprintf("%q", bad)) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestParseEntry(t *testing.T) {
	if m, e, err := ParseEntry("pumps.start"); err != nil || m != "pumps" || e != "start" {
		t.Fatalf("%q %q %v", m, e, err)
	}
	for _, bad := range []string{"pumps", "pumps.", ".start", "a.b.c", "_p.start"} {
		if _, _, err := ParseEntry(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestKind(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("x: %w", ErrInvalid):                     "invalid",
		fmt.Errorf("x: %w", ErrNotFound):                    "not_found",
		fmt.Errorf("x: %w", ErrConflict):                    "conflict",
		fmt.Errorf("x: %w", ErrUnavailable):                 "unavailable",
		fmt.Errorf("x: %w", ErrUnauthenticated):             "unauthenticated",
		&auth.DeniedError{Kind: "scope", Need: "tag:write"}: "permission_denied",
		&ScriptError{Kind: KindTimeout, Detail: "2s"}:       "timeout",
		&ProjectError{Problems: []Problem{{Line: 3}}}:       "invalid",
		&WideningError{}:                                    "acknowledgement_required",
		errors.New("disk on fire"):                          "internal",
	} {
		if got := Kind(err); got != want {
			t.Errorf("Kind(%v) = %q, want %q", err, got, want)
		}
	}
	if !errors.Is(&ProjectError{}, ErrInvalidProject) {
		t.Error("a ProjectError is not ErrInvalidProject")
	}
}
