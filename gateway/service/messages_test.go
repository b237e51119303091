package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/sandbox/packages"
	"qubiq.dev/edge/store"
)

// saysItOnce fails when msg repeats one of its ": "-separated parts, names
// a layer of the daemon ("store"), or writes the kind err is in words
// that a front door shows beside the message anyway.
func saysItOnce(t *testing.T, name string, err error, want string) {
	t.Helper()
	msg := gateway.Message(err)
	if msg != want {
		t.Errorf("%s: message %q; want %q", name, msg, want)
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(msg, ": ") {
		if seen[part] {
			t.Errorf("%s: %q says %q twice", name, msg, part)
		}
		seen[part] = true
		if part == "store" || part == "not found" && strings.HasPrefix(msg, "not found") || strings.HasPrefix(part, "invalid request") ||
			strings.HasPrefix(part, "conflict") || strings.HasPrefix(part, "invalid user") {
			t.Errorf("%s: %q names a layer or its kind (%q)", name, msg, part)
		}
	}
}

// TestErrors_SayTheirKindOnceInTheRequestsWords: the service's errors
// carry their kind beside the text (gateway.Kind), never as a repeated
// label, and speak of what the request named, not of the store keeping
// it; a script the store lacks is an "unknown module" as a run of it
// says.
func TestErrors_SayTheirKindOnceInTheRequestsWords(t *testing.T) {
	s := newService(t, testOptions(t, t.TempDir()))
	ctx := context.Background()
	full := auth.Full("admin", auth.RealmPlatform, "rest")
	type tc struct {
		name string
		err  error
		kind string
		want string
	}
	var cases []tc
	add := func(name string, err error, kind, want string) { cases = append(cases, tc{name, err, kind, want}) }

	add("passwd of an unknown user", s.SetPassword(ctx, full, "nobody", "long-enough"), "not_found", `user "nobody": not found`)
	_, err0 := s.DisableUser(ctx, full, "nobody")
	add("disable an unknown user", err0, "not_found", `user "nobody": not found`)
	add("a short password", s.AddUser(ctx, full, gateway.NewUser{Name: "bob", Realm: auth.RealmOperator, Level: auth.LevelView, Password: "short"}),
		"invalid", `user "bob": password shorter than 8 characters`)
	_, err := s.RollbackScript(ctx, full, "nomod")
	add("rollback of an unknown module", err, "not_found", `unknown module "nomod"`)
	_, err = s.ScriptVersions(ctx, full, "nomod")
	add("versions of an unknown module", err, "not_found", `unknown module "nomod"`)
	_, err = s.ScriptCode(ctx, full, "nomod", 0)
	add("code of an unknown module", err, "not_found", `unknown module "nomod"`)
	add("a package operation running", packageError(fmt.Errorf("install requests==2.32.3: %w", packages.ErrPackagesBusy)),
		"conflict", "install requests==2.32.3: another package operation is running")
	add("removing a package not installed", packageError(fmt.Errorf("remove requests: %w", packages.ErrNotInstalled)),
		"not_found", "remove requests: package not installed")
	add("a store's not found", kinded(fmt.Errorf("store: var %q: %w", "x", store.ErrNotFound)), "not_found", `var "x": not found`)

	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if k := gateway.Kind(c.err); k != c.kind {
			t.Errorf("%s: kind %q; want %q (%v)", c.name, k, c.kind, c.err)
		}
		saysItOnce(t, c.name, c.err, c.want)
	}
}

// TestMessage_TakesOffTheKindsLabel: an error written "%w: ..." around a
// sentinel loses that label in gateway.Message (the front door shows the
// kind beside it); gateway.Errorf's text is its own.
func TestMessage_TakesOffTheKindsLabel(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("%w: missing \"name\"", gateway.ErrInvalid):       `missing "name"`,
		fmt.Errorf("%w: remove x: gone", gateway.ErrNotFound):        "remove x: gone",
		fmt.Errorf("api key %q: %w", "k", gateway.ErrNotFound):       `api key "k": not found`,
		gateway.Errorf(gateway.ErrConflict, "user %q exists", "bob"): `user "bob" exists`,
		errors.New("conflict: not a kinded error"):                   "conflict: not a kinded error",
	} {
		if got := gateway.Message(err); got != want {
			t.Errorf("Message(%q) = %q; want %q", err, got, want)
		}
	}
	if err := gateway.Errorf(gateway.ErrConflict, "x: %w", store.ErrNotFound); !errors.Is(err, gateway.ErrConflict) || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Errorf does not wrap its kind and its cause: %v", err)
	}
}
