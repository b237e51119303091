package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"qubiq.dev/edge/internal/suggest"
)

// The supervisor's tools (docs/mqtt.md): an ed25519 key pair for
// mqtt.trusted_keys, and a signed command to publish by hand with
// mosquitto_pub. Neither talks to the daemon.

func init() {
	commands["mqtt keygen"] = command{name: "mqtt keygen", args: "--out FILE [--key-id ID]",
		help: "Make an ed25519 key pair for a supervisor: the private key goes to FILE (PEM, mode 0600), the public half is printed as an mqtt.trusted_keys entry.",
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.StringVar(&o.mqttOut, "out", "", "file for the private key (PEM PKCS #8); must not exist")
			fs.StringVar(&o.mqttKeyID, "key-id", "", "the key id to print (default: FILE's name without extension)")
		}, run: cmdMQTTKeygen}
	commands["mqtt sign"] = command{name: "mqtt sign", args: "--key FILE --topic cmd/... --body FILE [--key-id ID] [--id ID] [--ts RFC3339]",
		help: "Print the signed command JSON for TOPIC (cmd/scripts/push, cmd/scripts/run, cmd/scripts/rollback, cmd/tags/write) with the body in FILE (- for stdin), to publish on qubiq/v1/<appliance_id>/TOPIC.",
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.StringVar(&o.mqttKey, "key", "", "private key file from mqtt keygen")
			fs.StringVar(&o.mqttKeyID, "key-id", "", "key id (default: the key file's name without extension)")
			fs.StringVar(&o.mqttTopic, "topic", "", "command topic below the appliance's topics")
			fs.StringVar(&o.mqttBody, "body", "", "file holding the body JSON object (- for stdin)")
			fs.StringVar(&o.mqttID, "id", "", "command id (default: random); the reply comes on reply/ID")
			fs.StringVar(&o.mqttTS, "ts", "", "signing time, RFC 3339 UTC (default: now)")
		}, run: cmdMQTTSign}
}

func keyIDOf(file, given string) string {
	if given != "" {
		return given
	}
	return strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
}

func cmdMQTTKeygen(_ context.Context, c *cli, o *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	if o.mqttOut == "" {
		return usagef("--out FILE is required (the private key is never printed)")
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(o.mqttOut, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	id, b64 := keyIDOf(o.mqttOut, o.mqttKeyID), base64.StdEncoding.EncodeToString(pub)
	if c.g.json {
		return c.printJSON(map[string]string{"key_id": id, "public_key": b64, "private_key_file": o.mqttOut})
	}
	_, err = fmt.Fprintf(c.stdout, "trusted_keys: {%s: %q}\n", id, b64)
	return err
}

// signedBytes is what a command's signature covers (docs/mqtt.md, "Signed
// commands"); a test checks it against the daemon's verifier.
func signedBytes(topic, id, ts string, body []byte) []byte {
	sum := sha256.Sum256(body)
	return []byte("qubiq-cmd-v1\n" + topic + "\n" + id + "\n" + ts + "\n" + hex.EncodeToString(sum[:]))
}

func cmdMQTTSign(_ context.Context, c *cli, o *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	if o.mqttKey == "" || o.mqttTopic == "" || o.mqttBody == "" {
		return usagef("--key, --topic and --body are required")
	}
	if err := checkCommandTopic(o.mqttTopic); err != nil {
		return err
	}
	pemBytes, err := os.ReadFile(o.mqttKey)
	if err != nil {
		return err
	}
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		return fmt.Errorf("%s: not a PEM file", o.mqttKey)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return fmt.Errorf("%s: %w", o.mqttKey, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return fmt.Errorf("%s: not an ed25519 key", o.mqttKey)
	}
	raw, err := readInput(o.mqttBody)
	if err != nil {
		return err
	}
	if err := checkBodyObject(o.mqttBody, raw); err != nil {
		return err
	}
	var body strings.Builder
	if err := compactInto(&body, raw); err != nil {
		return err
	}
	id := o.mqttID
	if id == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
	}
	if strings.ContainsAny(id, "/+#\x00") || len(id) > 128 {
		return usagef("--id: at most 128 bytes without '/', '+', '#' or NUL")
	}
	ts := time.Now().UTC()
	if o.mqttTS != "" {
		if ts, err = time.Parse(time.RFC3339Nano, o.mqttTS); err != nil {
			return usagef("--ts: %v", err)
		}
	}
	tsText := ts.UTC().Format(time.RFC3339Nano)
	sig := ed25519.Sign(priv, signedBytes(o.mqttTopic, id, tsText, []byte(body.String())))
	head, _ := json.Marshal(struct {
		ID    string `json:"id"`
		KeyID string `json:"key_id"`
		TS    string `json:"ts"`
	}{id, keyIDOf(o.mqttKey, o.mqttKeyID), tsText})
	sigJSON, _ := json.Marshal(base64.StdEncoding.EncodeToString(sig))
	_, err = fmt.Fprintf(c.stdout, "%s,\"body\":%s,\"sig\":%s}\n", head[:len(head)-1], body.String(), sigJSON)
	return err
}

// commandTopics are the command topics the supervisor link takes
// (docs/mqtt.md, "Topics"; a test holds this copy to mqtt.Commands).
var commandTopics = []string{"cmd/scripts/push", "cmd/scripts/run", "cmd/scripts/rollback", "cmd/tags/write"}

// checkCommandTopic refuses a topic that is not one of commandTopics,
// suggesting the nearest: a typo signed would be published and answered
// unknown_command by the appliance, far from whoever typed it.
func checkCommandTopic(topic string) error {
	for _, t := range commandTopics {
		if t == topic {
			return nil
		}
	}
	best, dist := "", -1
	for _, t := range commandTopics {
		if d := suggest.Distance(strings.TrimPrefix(topic, "/"), t); dist < 0 || d < dist {
			best, dist = t, d
		}
	}
	return usagef("--topic %q is not a command topic: did you mean %s? (want %s or %s, below the appliance's topics; docs/mqtt.md)",
		topic, best, strings.Join(commandTopics[:len(commandTopics)-1], ", "), commandTopics[len(commandTopics)-1])
}

// checkBodyObject refuses a --body that is not one JSON object, saying
// which it is: not JSON at all (where, and what it starts with), or JSON
// of another kind (an array, a string, ...). A command's body is an
// object (docs/mqtt.md, "Signed commands").
func checkBodyObject(name string, raw []byte) error {
	where := "--body " + name
	if name == "-" {
		where = "--body - (standard input)"
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return fmt.Errorf("%s is empty: the body must be a JSON object, such as {\"module\": \"pumps\"}", where)
	}
	if !json.Valid(trimmed) {
		why := ""
		var se *json.SyntaxError
		if err := json.Unmarshal(trimmed, new(any)); errors.As(err, &se) {
			why = fmt.Sprintf(" (%v, at byte %d)", se, se.Offset)
		}
		start := string(trimmed)
		if len(start) > 20 {
			start = start[:20] + "..."
		}
		return fmt.Errorf("%s is not JSON: it starts %q%s; the body must be a JSON object, such as {\"module\": \"pumps\"}", where, start, why)
	}
	if trimmed[0] != '{' {
		kind := map[byte]string{'[': "an array", '"': "a string", 't': "a boolean", 'f': "a boolean", 'n': "null"}[trimmed[0]]
		if kind == "" {
			kind = "a number"
		}
		return fmt.Errorf("%s is JSON %s, not an object: the body must be a JSON object, such as {\"module\": \"pumps\"}", where, kind)
	}
	return nil
}

func compactInto(w *strings.Builder, raw []byte) error {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return errors.New("--body: " + err.Error())
	}
	w.Write(b.Bytes())
	return nil
}
