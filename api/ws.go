package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
)

// WebSocket settings of GET /api/v1/ws (variables so tests can shorten
// them).
var (
	// wsHeartbeat is how often the server sends {"type":"heartbeat"} and
	// re-checks the session; a client that hears nothing for two of them
	// marks its values stale.
	wsHeartbeat = 5 * time.Second
	// wsWriteTimeout bounds one message write to a slow client.
	wsWriteTimeout = 5 * time.Second
)

const (
	wsMaxPaths     = 2000
	wsReadLimit    = 256 << 10
	wsSubscribeBuf = 4096
	wsAlarmBuf     = 1024
	wsAlarmBatch   = 256
	// wsCloseSessionEnded is the close code sent when the session ended
	// (logout, revocation, expiry): the panel shows its login screen
	// instead of reconnecting.
	wsCloseSessionEnded websocket.StatusCode = 4001
)

// ws serves live values over a WebSocket (the route table, testdata/routes.md: GET /ws
// needs tag:read). The protocol is apitypes.WSMessage. The socket closes
// at once when the browser session ends (Done), and when the session or a
// bearer grant expires.
//
// Alarms (docs/alarms.md, "WebSocket"): a browser session receives them
// from the start, any other client after {"type": "subscribe_alarms"}
// (until "unsubscribe_alarms"); the grant needs alarm:read. The server
// sends the current alarms first (apitypes.WSAlarm with snapshot: true,
// those GET /alarms lists by default), then {"type": "alarm"} for every
// transition of an alarm the grant may read, and after each batch an
// {"type": "alarm_summary"}. A client that fell behind gets every alarm
// again (snapshot, normal ones included) at the next heartbeat.
func (s *Server) ws(w http.ResponseWriter, r *http.Request, g auth.Grant) error {
	if err := checkOrigin(r); err != nil { // cross-site WebSocket hijacking
		return err
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		s.log.InfoContext(r.Context(), "websocket handshake failed", slog.Any("error", err))
		return nil // Accept answered
	}
	defer c.CloseNow()
	c.SetReadLimit(wsReadLimit)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	cs, isSession := sessionOf(r)
	var done <-chan struct{}
	if isSession {
		done = cs.info.Done
	}
	changes, dropped, unsubscribe := s.deps.Live.SubscribeValues(g, wsSubscribeBuf)
	defer unsubscribe()

	msgs := make(chan wsRequest)
	readErr := make(chan error, 1)
	go func() {
		for {
			m, err := readWSRequest(ctx, c)
			if err != nil {
				readErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()

	send := func(m any) error {
		wctx, wcancel := context.WithTimeout(ctx, wsWriteTimeout)
		defer wcancel()
		return wsjson.Write(wctx, c, m)
	}
	endSession := func(reason string) error {
		s.log.InfoContext(ctx, "websocket closed: session ended", slog.String("principal", g.Principal), slog.String("reason", reason))
		if err := send(apitypes.WSMessage{Type: "error", Reason: reason}); err != nil {
			return nil
		}
		return s.closeWS(ctx, c, wsCloseSessionEnded, reason)
	}
	var paths []string
	subscribed := map[string]bool{}
	snapshot := func() error {
		if len(paths) == 0 {
			return send(apitypes.WSMessage{Type: "values", Values: []apitypes.TagValue{}})
		}
		return send(apitypes.WSMessage{Type: "values", Values: wireTagValues(s.deps.Tags.ReadTags(ctx, g, paths))})
	}
	al := &wsAlarms{s: s, g: g, send: send}
	defer al.stop()
	if isSession {
		if err := al.start(ctx); err != nil {
			return nil
		}
	}
	hb := time.NewTicker(wsHeartbeat)
	defer hb.Stop()
	lastDropped := dropped()
	for {
		select {
		case <-done:
			return endSession("session ended (logged out, revoked or expired)")
		case err := <-readErr:
			if websocket.CloseStatus(err) == -1 && !errors.Is(err, context.Canceled) {
				s.log.DebugContext(ctx, "websocket read ended", slog.Any("error", err))
			}
			return nil
		case m := <-msgs:
			switch m.Type {
			case "":
				// refused by the strict decoder: say why, keep the socket
				if err := send(apitypes.WSMessage{Type: "error", Reason: m.invalid}); err != nil {
					return nil
				}
			case "subscribe":
				if len(m.Paths) > wsMaxPaths {
					return s.closeWS(ctx, c, websocket.StatusPolicyViolation, "too many paths")
				}
				paths = m.Paths
				subscribed = map[string]bool{}
				for _, p := range paths {
					subscribed[p] = true
				}
				if err := snapshot(); err != nil {
					return nil
				}
			case "subscribe_alarms":
				if err := al.start(ctx); err != nil {
					return nil
				}
			case "unsubscribe_alarms":
				al.stop()
			case "activity":
				if isSession {
					if _, err := s.deps.Sessions.Session(ctx, cs.token, true); errors.Is(err, ErrUnauthenticated) {
						return endSession("session ended")
					}
				}
			}
		case v := <-changes:
			batch := []apitypes.TagValue{}
			if subscribed[v.Path] {
				batch = append(batch, apitypes.FromVQT(v.Path, v.VQT))
			}
		drain:
			for len(batch) < 512 {
				select {
				case v := <-changes:
					if subscribed[v.Path] {
						batch = append(batch, apitypes.FromVQT(v.Path, v.VQT))
					}
				default:
					break drain
				}
			}
			if len(batch) > 0 {
				if err := send(apitypes.WSMessage{Type: "values", Values: batch}); err != nil {
					return nil
				}
			}
		case ev := <-al.ch:
			if err := al.forward(ctx, ev); err != nil {
				return nil
			}
		case now := <-hb.C:
			if err := al.catchUp(ctx); err != nil {
				return nil
			}
			if g.Expired(s.cfg.Now()) {
				return endSession("credentials expired")
			}
			if isSession {
				if _, err := s.deps.Sessions.Session(ctx, cs.token, false); errors.Is(err, ErrUnauthenticated) {
					return endSession("session ended")
				}
			}
			if d := dropped(); d != lastDropped {
				// Changes were lost: never leave the client silently stale.
				lastDropped = d
				if err := snapshot(); err != nil {
					return nil
				}
			}
			t := now.UTC()
			if err := send(apitypes.WSMessage{Type: "heartbeat", Time: &t}); err != nil {
				return nil
			}
		}
	}
}

// wsRequest is a message a client sends on the WebSocket
// (apitypes.WSSubscribe, apitypes.WSControl; docs/api.md, "WebSocket"):
// {"type": "subscribe", "paths": [...]}, {"type": "activity"},
// {"type": "subscribe_alarms"}, {"type": "unsubscribe_alarms"}.
type wsRequest struct {
	Type  string   `json:"type"`
	Paths []string `json:"paths"`

	invalid string // why the message was refused (Type is "")
}

// wsRequestFields are the fields each client message type has, in the
// order docs/api.md lists them.
var wsRequestFields = []struct {
	typ    string
	fields []string
}{
	{"subscribe", []string{"type", "paths"}},
	{"activity", []string{"type"}},
	{"subscribe_alarms", []string{"type"}},
	{"unsubscribe_alarms", []string{"type"}},
}

// readWSRequest reads the next client message and decodes it with the
// strict decoder of request bodies (decodeJSON: UTF-8, no duplicate keys,
// exact field names), against the fields of its own type: an unknown
// type is refused naming it and the known ones, a field its type does not
// have naming the fields it has. A message refused, or a binary one,
// comes back with Type "" and the reason; only a failed read is an error.
func readWSRequest(ctx context.Context, c *websocket.Conn) (wsRequest, error) {
	typ, data, err := c.Read(ctx)
	if err != nil {
		return wsRequest{}, err
	}
	if typ != websocket.MessageText {
		return wsRequest{invalid: "binary message refused: send JSON text messages"}, nil
	}
	return decodeWSRequest(data), nil
}

// decodeWSRequest decodes one client message (readWSRequest).
func decodeWSRequest(data []byte) wsRequest {
	var head map[string]json.RawMessage
	if err := decodeJSON(data, &head); err != nil {
		return wsRequest{invalid: "message refused: " + err.Error()}
	}
	raw, ok := head["type"]
	if !ok {
		return wsRequest{invalid: `message refused: missing "type"`}
	}
	var name string
	if err := decodeJSON(raw, &name); err != nil || name == "" {
		return wsRequest{invalid: `message refused: "type" must be a non-empty string`}
	}
	var fields []string
	var known []string
	for _, t := range wsRequestFields {
		known = append(known, t.typ)
		if t.typ == name {
			fields = t.fields
		}
	}
	if fields == nil {
		why := fmt.Sprintf("message refused: unknown message type %q (want %s)", name, strings.Join(known, ", "))
		if name == "write" {
			why += "; tags are written with POST /api/v1/tags/write"
		}
		return wsRequest{invalid: why}
	}
	var m wsRequest
	var err error
	if len(fields) > 1 {
		err = decodeJSON(data, &m)
	} else {
		var only struct {
			Type string `json:"type"`
		}
		err = decodeJSON(data, &only)
		m.Type = only.Type
	}
	if err != nil {
		return wsRequest{invalid: fmt.Sprintf("message %q refused: %v (%q has %s)", name, err, name, quoteAll(fields))}
	}
	return m
}

// quoteAll is `"type" and "paths"`.
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(q) == 1 {
		return "only " + q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// closeWS closes c with code and reason; a peer that already left is only
// logged (at debug).
func (s *Server) closeWS(ctx context.Context, c *websocket.Conn, code websocket.StatusCode, reason string) error {
	if err := c.Close(code, reason); err != nil {
		s.log.DebugContext(ctx, "websocket close", slog.Any("error", err))
	}
	return nil
}

// wsAlarms is the alarm side of one WebSocket: its subscription (nil
// until started) and how it sends.
type wsAlarms struct {
	s       *Server
	g       auth.Grant
	send    func(any) error
	ch      <-chan gateway.AlarmEvent
	dropped func() uint64
	cancel  func()
	last    uint64
}

// start subscribes (once) and sends the current alarms and the summary. A
// grant without alarm:read gets an error message; the socket stays open.
func (a *wsAlarms) start(ctx context.Context) error {
	if a.ch != nil || a.s.deps.Alarms == nil {
		return nil
	}
	if err := a.g.RequireScope(auth.AlarmRead, "alarm messages"); err != nil {
		return a.send(apitypes.WSMessage{Type: "error", Reason: err.Error()})
	}
	a.ch, a.dropped, a.cancel = a.s.deps.Alarms.SubscribeAlarms(a.g, wsAlarmBuf)
	a.last = a.dropped()
	return a.snapshot(ctx, false)
}

// stop ends the subscription.
func (a *wsAlarms) stop() {
	if a.cancel != nil {
		a.cancel()
		a.ch, a.cancel = nil, nil
	}
}

// snapshot sends the current alarms (every one with all) and the summary.
func (a *wsAlarms) snapshot(ctx context.Context, all bool) error {
	list, err := a.s.deps.Alarms.ListAlarms(ctx, a.g, gateway.AlarmFilter{IncludeNormal: all})
	if err != nil {
		return a.send(apitypes.WSMessage{Type: "error", Reason: gateway.Message(err)})
	}
	for _, al := range list.Alarms {
		if err := a.send(apitypes.WSAlarm{Type: "alarm", Alarm: wireAlarm(al), Snapshot: true}); err != nil {
			return err
		}
	}
	return a.send(apitypes.WSAlarmSummary{Type: "alarm_summary", Unacked: list.Unacked, Active: list.Active, Highest: optString(list.Highest)})
}

// forward sends ev and the events already queued behind it (a batch),
// then the summary.
func (a *wsAlarms) forward(ctx context.Context, ev gateway.AlarmEvent) error {
	for n := 0; ; n++ {
		at := ev.At.UTC()
		m := apitypes.WSAlarm{Type: "alarm", Alarm: wireAlarm(ev.Alarm), Event: ev.Event, From: ev.From, To: ev.To,
			Cause: ev.Cause, By: ev.By, At: &at, Seq: ev.Seq}
		if err := a.send(m); err != nil {
			return err
		}
		if n >= wsAlarmBatch {
			break
		}
		select {
		case ev = <-a.ch:
			continue
		default:
		}
		break
	}
	sum, err := a.s.deps.Alarms.AlarmSummary(ctx, a.g)
	if err != nil {
		return nil
	}
	return a.send(apitypes.WSAlarmSummary{Type: "alarm_summary", Unacked: sum.Unacked, Active: sum.Active, Highest: optString(sum.Highest)})
}

// catchUp sends every alarm again when events were lost since the last
// look, so the client never stays silently stale.
func (a *wsAlarms) catchUp(ctx context.Context) error {
	if a.ch == nil {
		return nil
	}
	if d := a.dropped(); d != a.last {
		a.last = d
		return a.snapshot(ctx, true)
	}
	return nil
}
