package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/auth"
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
	// wsCloseSessionEnded is the close code sent when the session ended
	// (logout, revocation, expiry): the panel shows its login screen
	// instead of reconnecting.
	wsCloseSessionEnded websocket.StatusCode = 4001
)

// ws serves live values over a WebSocket (the route table, testdata/routes.md: GET /ws
// needs tag:read). The protocol is apitypes.WSMessage. The socket closes
// at once when the browser session ends (Done), and when the session or a
// bearer grant expires.
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

	msgs := make(chan apitypes.WSMessage)
	readErr := make(chan error, 1)
	go func() {
		for {
			var m apitypes.WSMessage
			if err := wsjson.Read(ctx, c, &m); err != nil {
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

	send := func(m apitypes.WSMessage) error {
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
		case now := <-hb.C:
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

// closeWS closes c with code and reason; a peer that already left is only
// logged (at debug).
func (s *Server) closeWS(ctx context.Context, c *websocket.Conn, code websocket.StatusCode, reason string) error {
	if err := c.Close(code, reason); err != nil {
		s.log.DebugContext(ctx, "websocket close", slog.Any("error", err))
	}
	return nil
}
