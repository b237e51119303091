package mqtt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"qubiq.dev/edge/tagpath"
)

// Command topics, below the appliance's base topic.
const (
	CmdPush     = "cmd/scripts/push"
	CmdRun      = "cmd/scripts/run"
	CmdRollback = "cmd/scripts/rollback"
	CmdWrite    = "cmd/tags/write"
)

// Commands are the command topics the link accepts.
var Commands = []string{CmdPush, CmdRun, CmdRollback, CmdWrite}

// Refusal kinds of a command, answered in the reply's error.kind (beside
// the service layer's own kinds: permission_denied, timeout, busy, ...).
const (
	KindUnsigned       = "unsigned"        // no sig while mqtt.require_signed is on
	KindBadSignature   = "bad_signature"   // sig is not base64 of a valid ed25519 signature by the key
	KindUnknownKey     = "unknown_key"     // key_id names no trusted key (or no grant)
	KindReplayed       = "replayed"        // id seen within the window, or a push version not above the last
	KindStale          = "stale"           // ts older than mqtt.stale_after, or that far in the future
	KindOversized      = "oversized"       // payload over MaxCommandBytes
	KindMalformed      = "malformed"       // not one JSON object, or a duplicate or unknown key
	KindWrongType      = "invalid"         // a field of the wrong type or out of range
	KindUnknownCommand = "unknown_command" // a topic below cmd/ that is not a command
	KindBusy           = "busy"            // the command queue is full
	KindUnavailable    = "unavailable"     // the audit log cannot take the record; retry
)

// MaxCommandBytes is the largest command payload accepted (1 MiB: a
// script push carries the module's code).
const MaxCommandBytes = 1 << 20

// MaxIDBytes is the longest command id; an id is one topic level of its
// reply (no '/', '+', '#', NUL).
const MaxIDBytes = 128

// SignedPrefix starts the bytes a command's signature covers.
const SignedPrefix = "qubiq-cmd-v1\n"

// Refusal is a command refused before or instead of its call: the kind
// (one of the Kind* constants) and a detail for the supervisor.
type Refusal struct {
	Kind   string
	Detail string
}

// Error returns "kind: detail".
func (r *Refusal) Error() string { return r.Kind + ": " + r.Detail }

func refuse(kind, format string, args ...any) *Refusal {
	return &Refusal{Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// Envelope is a decoded command: its topic below the base (CmdPush ...),
// id, key id, the time it was signed (TS, and TSText exactly as sent), the
// body exactly as it appears in the payload, and the signature (nil when
// absent).
type Envelope struct {
	Topic  string
	ID     string
	KeyID  string
	TS     time.Time
	TSText string
	Body   json.RawMessage
	Sig    []byte
}

// envelopeKeys are the keys of a command object.
var envelopeKeys = map[string]bool{"id": true, "key_id": true, "ts": true, "body": true, "sig": true}

// DecodeEnvelope decodes a command payload received on topic (below the
// base). It checks the size, that the payload is one JSON object with the
// envelope's keys each once and nothing else (malformed), their types
// (invalid), the id's form, and that topic is a command
// (unknown_command). The signature is not verified here (Verify). The id
// is returned as far as it could be read, so a refusal can still be
// answered on reply/<id>.
func DecodeEnvelope(topic string, payload []byte) (id string, env *Envelope, err error) {
	if len(payload) > MaxCommandBytes {
		return "", nil, refuse(KindOversized, "payload of %d bytes is over %d", len(payload), MaxCommandBytes)
	}
	fields, rerr := topLevel(payload)
	if raw, ok := fields["id"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil && ValidID(s) {
			id = s
		}
	}
	if rerr != nil {
		return id, nil, rerr
	}
	for k := range fields {
		if !envelopeKeys[k] {
			return id, nil, refuse(KindMalformed, "unknown key %q", k)
		}
	}
	if !isCommand(topic) {
		return id, nil, refuse(KindUnknownCommand, "%q is not a command (%s)", topic, strings.Join(Commands, ", "))
	}
	env = &Envelope{Topic: topic}
	str := func(k string, required bool) (string, *Refusal) {
		raw, ok := fields[k]
		if !ok {
			if required {
				return "", refuse(KindWrongType, "%s is missing", k)
			}
			return "", nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", refuse(KindWrongType, "%s must be a string", k)
		}
		return s, nil
	}
	var r *Refusal
	if env.ID, r = str("id", true); r != nil {
		return id, nil, r
	}
	if !ValidID(env.ID) {
		return "", nil, refuse(KindWrongType, "id must be "+idRule, MaxIDBytes)
	}
	if env.KeyID, r = str("key_id", true); r != nil {
		return id, nil, r
	}
	if env.TSText, r = str("ts", true); r != nil {
		return id, nil, r
	}
	ts, perr := time.Parse(time.RFC3339Nano, env.TSText)
	if perr != nil || !strings.HasSuffix(env.TSText, "Z") {
		return id, nil, refuse(KindWrongType, "ts must be RFC 3339 UTC (ending in Z): %q", env.TSText)
	}
	env.TS = ts
	body, ok := fields["body"]
	if !ok {
		return id, nil, refuse(KindWrongType, "body is missing")
	}
	if len(body) == 0 || body[0] != '{' {
		return id, nil, refuse(KindWrongType, "body must be an object")
	}
	env.Body = body
	sig, r := str("sig", false)
	if r != nil {
		return id, nil, r
	}
	if sig != "" {
		b, err := base64.StdEncoding.DecodeString(sig)
		if err != nil || len(b) != ed25519.SignatureSize {
			return id, nil, refuse(KindBadSignature, "sig must be base64 of a %d-byte ed25519 signature", ed25519.SignatureSize)
		}
		env.Sig = b
	}
	return id, env, nil
}

// topLevel splits one JSON object into its keys and raw values (exactly
// the bytes of the payload), refusing anything else, a duplicate key, and
// data after the object. With a refusal it returns the keys read before
// it (an "id" given twice is dropped: it is not known which one is meant).
func topLevel(payload []byte) (map[string]json.RawMessage, *Refusal) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	tok, err := dec.Token()
	if err != nil {
		return nil, refuse(KindMalformed, "not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, refuse(KindMalformed, "a command is a JSON object")
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out, refuse(KindMalformed, "not JSON: %v", err)
		}
		k, _ := tok.(string)
		var raw json.RawMessage // the value's exact bytes in payload
		if err := dec.Decode(&raw); err != nil {
			return out, refuse(KindMalformed, "not JSON: %v", err)
		}
		if _, dup := out[k]; dup {
			if k == "id" {
				delete(out, "id")
			}
			return out, refuse(KindMalformed, "key %q twice", k)
		}
		out[k] = raw
	}
	if _, err := dec.Token(); err != nil {
		return out, refuse(KindMalformed, "not JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return out, refuse(KindMalformed, "data after the command object")
	}
	return out, nil
}

// ValidID reports whether id can be a command id: 1 to MaxIDBytes bytes of
// UTF-8, no topic separator or wildcard, and no character an MQTT topic
// must not hold (tagpath.CheckTopicText: NUL, control characters,
// noncharacters): the id is its reply's topic level (reply/<id>), and a
// reply on a topic the broker refuses would cost the link its
// connection at every attempt.
func ValidID(id string) bool {
	return id != "" && len(id) <= MaxIDBytes && !strings.ContainsAny(id, tagpath.TopicRefused) &&
		tagpath.CheckTopicText(id) == nil
}

// idRule is ValidID's rule, for refusals.
const idRule = "1 to %d bytes of UTF-8 without '/', '+', '#', NUL, control characters or noncharacters"

func isCommand(topic string) bool {
	for _, c := range Commands {
		if c == topic {
			return true
		}
	}
	return false
}

// SignedBytes returns the bytes a command's signature covers:
// "qubiq-cmd-v1\n" + topic + "\n" + id + "\n" + ts + "\n" +
// hex(sha256(body)), with body and ts exactly as in the payload.
func SignedBytes(topic, id, ts string, body []byte) []byte {
	sum := sha256.Sum256(body)
	return []byte(SignedPrefix + topic + "\n" + id + "\n" + ts + "\n" + hex.EncodeToString(sum[:]))
}

// Verify checks env's signature against key.
func (env *Envelope) Verify(key ed25519.PublicKey) *Refusal {
	if env.Sig == nil {
		return refuse(KindUnsigned, "the command has no sig")
	}
	if !ed25519.Verify(key, SignedBytes(env.Topic, env.ID, env.TSText, env.Body), env.Sig) {
		return refuse(KindBadSignature, "the signature does not verify with key %q", env.KeyID)
	}
	return nil
}

// Fresh checks env.TS against now: refused as stale when older than
// staleAfter or more than staleAfter ahead (a wrong clock on either side).
func (env *Envelope) Fresh(now time.Time, staleAfter time.Duration) *Refusal {
	age := now.Sub(env.TS)
	switch {
	case age > staleAfter:
		return refuse(KindStale, "ts %s is %s old, over stale_after %s", env.TSText, age.Round(time.Millisecond), staleAfter)
	case -age > staleAfter:
		return refuse(KindStale, "ts %s is %s in the future, over stale_after %s", env.TSText, (-age).Round(time.Millisecond), staleAfter)
	}
	return nil
}

// Sign makes the command payload for topic (below the base) with id, the
// time ts, body (a JSON object, sent as given) and the private key of
// keyID: what `qubiqctl mqtt sign` prints.
func Sign(priv ed25519.PrivateKey, keyID, topic, id string, ts time.Time, body json.RawMessage) ([]byte, error) {
	if !ValidID(id) {
		return nil, fmt.Errorf("id %q: "+idRule, id, MaxIDBytes)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil {
		return nil, fmt.Errorf("body must be a JSON object: %w", err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil {
		return nil, err
	}
	tsText := ts.UTC().Format(time.RFC3339Nano)
	sig := ed25519.Sign(priv, SignedBytes(topic, id, tsText, compact.Bytes()))
	head, err := json.Marshal(struct {
		ID    string `json:"id"`
		KeyID string `json:"key_id"`
		TS    string `json:"ts"`
	}{id, keyID, tsText})
	if err != nil {
		return nil, err
	}
	sigJSON, _ := json.Marshal(base64.StdEncoding.EncodeToString(sig))
	out := append(head[:len(head)-1], `,"body":`...)
	out = append(out, compact.Bytes()...)
	out = append(out, `,"sig":`...)
	out = append(out, sigJSON...)
	return append(out, '}'), nil
}

// ParsePublicKey decodes a trusted key: base64 (standard) of the 32-byte
// ed25519 public key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%d bytes, want a %d-byte ed25519 public key", len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}
