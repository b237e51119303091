package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/mqtt"
)

// TestMQTTKeygenSign_VerifiedByTheLink: a key from `mqtt keygen` and a
// command from `mqtt sign` verify with the link's own decoder and
// verifier (the signed bytes have one definition, in package mqtt; this
// copy is checked against it).
func TestMQTTKeygenSign_VerifiedByTheLink(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "sup-a.pem")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"mqtt", "keygen", "--out", keyFile}, &out, &errOut); code != 0 {
		t.Fatalf("keygen: %d %s", code, errOut.String())
	}
	m := regexp.MustCompile(`^trusted_keys: \{sup-a: "([A-Za-z0-9+/=]+)"\}\n$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("keygen printed %q", out.String())
	}
	if st, _ := os.Stat(keyFile); st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v", st.Mode().Perm())
	}
	pub, err := mqtt.ParsePublicKey(m[1])
	if err != nil {
		t.Fatal(err)
	}
	body := filepath.Join(dir, "body.json")
	os.WriteFile(body, []byte("{\n  \"module\": \"pumps\", \"version\": 2,\n  \"code\": \"def start(a):\\n    return 1\\n\"\n}\n"), 0o644)
	out.Reset()
	if code := run(context.Background(), []string{"mqtt", "sign", "--key", keyFile, "--topic", mqtt.CmdPush, "--body", body, "--id", "c-7"}, &out, &errOut); code != 0 {
		t.Fatalf("sign: %d %s", code, errOut.String())
	}
	id, env, err := mqtt.DecodeEnvelope(mqtt.CmdPush, bytes.TrimSpace(out.Bytes()))
	if err != nil || id != "c-7" || env.KeyID != "sup-a" {
		t.Fatalf("decode %q: %v %+v", out.String(), err, env)
	}
	if r := env.Verify(pub); r != nil {
		t.Errorf("the link refuses the signed command: %v", r)
	}
	if r := env.Fresh(time.Now(), time.Minute); r != nil {
		t.Errorf("fresh: %v", r)
	}
	if !strings.Contains(string(env.Body), `"version":2`) {
		t.Errorf("body %s", env.Body)
	}
	if code := run(context.Background(), []string{"mqtt", "keygen", "--out", keyFile}, &out, &errOut); code == 0 {
		t.Error("keygen overwrote an existing key file")
	}
}

const mqttStatusHealth = `{"status":"degraded","reasons":["mqtt link down: tcp://b1:1883: connection refused"],"version":"1.1.0","uptime_s":5,
"sandbox":{"mode":"cgroup2"},"devices":{},"escape_hatch":false,
"mqtt":{"connected":false,"last_error":"tcp://b1:1883: connection refused","last_error_at":"2026-12-01T10:00:00Z",
"outbox_depth":1200,"outbox_bytes":180000,"outbox_oldest_age_s":62,"outbox_dropped":7,"require_signed":false,
"commands_accepted":3,"commands_refused":2}}`

// TestRun_Status_MQTTLink: status shows the link: down with its last
// error, the outbox and its drops, signatures off, the command counts.
func TestRun_Status_MQTTLink(t *testing.T) {
	clearEnv(t)
	d := newFakeDaemon(t, map[string]answer{"GET /api/v1/health": {200, mqttStatusHealth}})
	code, out, errOut := runCLI("--url", d.srv.URL, "status")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^mqtt +down$`).MatchString(out) {
		t.Errorf("status lacks the link's state row:\n%s", out)
	}
	for _, want := range []string{"tcp://b1:1883: connection refused (2026-12-01T10:00:00Z)",
		"1200 messages, 180000 bytes, oldest 62s, 7 dropped", "OFF (mqtt.require_signed: false", "3 accepted, 2 refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

// TestMQTTSign_TopicAndBodyChecked: the topic is one of the link's
// command topics (this copy is mqtt.Commands), a typo is refused naming
// the nearest; a body that is not JSON, or JSON but not an object, is
// refused saying which, not with the decoder's bare words.
func TestMQTTSign_TopicAndBodyChecked(t *testing.T) {
	if strings.Join(commandTopics, " ") != strings.Join(mqtt.Commands, " ") {
		t.Fatalf("the CLI's command topics %v are not the link's %v", commandTopics, mqtt.Commands)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "sup-a.pem")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"mqtt", "keygen", "--out", keyFile}, &out, &errOut); code != 0 {
		t.Fatalf("keygen: %d %s", code, errOut.String())
	}
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.json", `{"module": "pumps"}`)
	for _, c := range []struct {
		topic, body string
		code        int
		want        string
	}{
		{"cmd/scripts/psuh", good, exitUsage, `--topic "cmd/scripts/psuh" is not a command topic: did you mean cmd/scripts/push? (want cmd/scripts/push, cmd/scripts/run, cmd/scripts/rollback or cmd/tags/write`},
		{"cmd/tag/write", good, exitUsage, "did you mean cmd/tags/write?"},
		{"scripts/run", good, exitUsage, "did you mean cmd/scripts/run?"},
		{"cmd/scripts/push", file("no.json", "not json"), exitError, `is not JSON: it starts "not json" (invalid character 'o' in literal null (expecting 'u'), at byte 2); the body must be a JSON object`},
		{"cmd/scripts/push", file("arr.json", `[1, 2]`), exitError, "is JSON an array, not an object: the body must be a JSON object"},
		{"cmd/scripts/push", file("empty.json", " \n"), exitError, "is empty: the body must be a JSON object"},
	} {
		out.Reset()
		errOut.Reset()
		code := run(context.Background(), []string{"mqtt", "sign", "--key", keyFile, "--topic", c.topic, "--body", c.body}, &out, &errOut)
		if code != c.code || !strings.Contains(errOut.String(), c.want) || out.Len() != 0 {
			t.Errorf("%s %s: exit %d, stderr %q; want %d naming %q", c.topic, filepath.Base(c.body), code, errOut.String(), c.code, c.want)
		}
	}
}
