package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"qubiq.dev/edge/api/apitypes"
)

// TestWS_MessagesDecodedStrictly: a client message on the WebSocket goes
// through the strict decoder of request bodies: invalid UTF-8, a duplicate
// key, a wrongly cased field, a binary frame are answered with an error
// message naming the problem, the socket stays open, and a well-formed
// subscribe still works.
func TestWS_MessagesDecodedStrictly(t *testing.T) {
	e := newLVEnv(t, Config{})
	ts := httptest.NewServer(e.srv.Handler())
	t.Cleanup(ts.Close)
	c, _ := e.login(t, "op")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, strings.Replace(ts.URL, "http", "ws", 1)+"/api/v1/ws", &websocket.DialOptions{
		HTTPHeader: http.Header{"Cookie": {c.String()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	next := func(typ string) apitypes.WSMessage {
		t.Helper()
		for {
			var m apitypes.WSMessage
			if err := wsjson.Read(ctx, ws, &m); err != nil {
				t.Fatalf("read %s: %v", typ, err)
			}
			if m.Type == typ {
				return m
			}
		}
	}
	for _, tt := range []struct {
		typ       websocket.MessageType
		msg, want string
	}{
		{websocket.MessageText, "{\"type\": \"subscribe\", \"paths\": [\"Line1/\xff\"]}", `field "paths[0]": invalid UTF-8`},
		{websocket.MessageText, `{"type": "subscribe", "type": "activity"}`, `duplicate key "type"`},
		{websocket.MessageText, `{"type": "subscribe", "Paths": ["Line1/Speed"]}`, `unknown field "Paths"`},
		{websocket.MessageText, `{"paths": []}`, `missing "type"`},
		{websocket.MessageBinary, `{"type": "subscribe"}`, "binary message refused"},
		{websocket.MessageText, `{"type": "nope"}`, `unknown message type "nope" (want subscribe, activity, subscribe_alarms, unsubscribe_alarms)`},
		{websocket.MessageText, `{"type": "write", "path": "x"}`, `unknown message type "write"`},
		{websocket.MessageText, `{"type": "subscribe", "path": "x"}`, `unknown field "path" ("subscribe" has "type" and "paths")`},
	} {
		if err := ws.Write(ctx, tt.typ, []byte(tt.msg)); err != nil {
			t.Fatal(err)
		}
		if m := next("error"); !strings.Contains(m.Reason, tt.want) {
			t.Errorf("message %q: error %q, want it to name %q", tt.msg, m.Reason, tt.want)
		}
	}
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type": "subscribe", "paths": ["Line1/Speed"]}`)); err != nil {
		t.Fatal(err)
	}
	if m := next("values"); len(m.Values) != 1 || m.Values[0].Path != "Line1/Speed" {
		t.Fatalf("subscribe after refused messages: %+v", m)
	}
}

// TestWS_DecodeRequest_UnknownTypeAndFields: an unknown message type is
// refused naming it and the known ones ("write" says where writes go); a
// field its type does not have names the fields that type has; each known
// type decodes.
func TestWS_DecodeRequest_UnknownTypeAndFields(t *testing.T) {
	for msg, want := range map[string]string{
		`{"type": "nope"}`:                   `message refused: unknown message type "nope" (want subscribe, activity, subscribe_alarms, unsubscribe_alarms)`,
		`{"type": "write", "path": "x"}`:     `message refused: unknown message type "write" (want subscribe, activity, subscribe_alarms, unsubscribe_alarms); tags are written with POST /api/v1/tags/write`,
		`{"type": "activity", "paths": []}`:  `message "activity" refused: unknown field "paths" ("activity" has only "type")`,
		`{"type": "subscribe", "path": "x"}`: `message "subscribe" refused: unknown field "path" ("subscribe" has "type" and "paths")`,
		`{"type": 7}`:                        `message refused: "type" must be a non-empty string`,
		`[1]`:                                `message refused: `,
	} {
		if got := decodeWSRequest([]byte(msg)); got.Type != "" || !strings.HasPrefix(got.invalid, want) {
			t.Errorf("%s: %+v; want %q", msg, got, want)
		}
	}
	for msg, typ := range map[string]string{
		`{"type": "subscribe", "paths": ["A/B"]}`: "subscribe", `{"type": "activity"}`: "activity",
		`{"type": "subscribe_alarms"}`: "subscribe_alarms", `{"type": "unsubscribe_alarms"}`: "unsubscribe_alarms",
	} {
		if got := decodeWSRequest([]byte(msg)); got.Type != typ || got.invalid != "" {
			t.Errorf("%s: %+v", msg, got)
		}
	}
}
