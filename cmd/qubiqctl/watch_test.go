package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"qubiq.dev/edge/api/apitypes"
)

// wsDaemon serves GET /api/v1/tags (tagListBody) and the live-value
// WebSocket, running script for the n-th connection (0, 1, ...) after it
// read the subscription, which it records.
type wsDaemon struct {
	srv  *httptest.Server
	mu   sync.Mutex
	subs [][]string
}

func newWSDaemon(t *testing.T, script func(ctx context.Context, c *websocket.Conn, n int)) *wsDaemon {
	t.Helper()
	d := &wsDaemon{}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/tags":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, tagListBody)
		case "/api/v1/ws":
			if r.Header.Get("Authorization") == "Bearer revoked" {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"type":"t","title":"Unauthorized","status":401,"detail":"invalid or revoked credentials","kind":"unauthenticated"}`)
				return
			}
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer c.CloseNow()
			var sub apitypes.WSMessage
			if err := wsjson.Read(r.Context(), c, &sub); err != nil {
				return
			}
			d.mu.Lock()
			n := len(d.subs)
			d.subs = append(d.subs, sub.Paths)
			d.mu.Unlock()
			script(r.Context(), c, n)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(d.srv.Close)
	return d
}

var wsT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func values(vs ...apitypes.TagValue) apitypes.WSMessage {
	return apitypes.WSMessage{Type: "values", Values: vs}
}

func tv(path string, v any, q string, sec int) apitypes.TagValue {
	return apitypes.TagValue{Path: path, Value: v, Quality: q, Timestamp: wsT0.Add(time.Duration(sec) * time.Second)}
}

// shorten makes the watch's timings test-sized.
func shorten(t *testing.T) {
	t.Helper()
	stale, retry, redraw := watchStaleAfter, watchRetry, watchRedrawEvery
	watchStaleAfter, watchRetry, watchRedrawEvery = 150*time.Millisecond, 20*time.Millisecond, 10*time.Millisecond
	t.Cleanup(func() { watchStaleAfter, watchRetry, watchRedrawEvery = stale, retry, redraw })
}

// TestTagsWatch_Lines: the selection is expanded and subscribed, the
// snapshot and each change print one line (time, path, value, quality,
// reason), and a close for an ended session ends the watch with exit 1
// and the daemon's reason.
func TestTagsWatch_Lines(t *testing.T) {
	clearEnv(t)
	shorten(t)
	d := newWSDaemon(t, func(ctx context.Context, c *websocket.Conn, _ int) {
		_ = wsjson.Write(ctx, c, values(tv("Line1/Pump/Setpoint", 900, "Good", 0), tv("Line1/Pump/Speed", 412.5, "Good", 0)))
		_ = wsjson.Write(ctx, c, values(tv("Line1/Pump/Speed", nil, "Bad_NotConnected", 1)))
		r := tv("Line1/Pump/Speed", 413, "Bad_Timeout", 2)
		r.Reason = "timeout: no answer"
		_ = wsjson.Write(ctx, c, values(r))
		_ = c.Close(4001, "session ended")
	})
	code, out, errOut := runCLI("--url", d.srv.URL, "tags", "watch", "--lines", "Line1/Pump")
	if code != 1 || !strings.Contains(errOut, "qubiqctl: the daemon ended the watch: session ended") {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
	if got := strings.Join(d.subs[0], ","); got != "Line1/Pump/Setpoint,Line1/Pump/Speed" {
		t.Errorf("subscribed %q", got)
	}
	want := "" +
		"2025-03-01T12:00:00.000Z  Line1/Pump/Setpoint  900  Good\n" +
		"2025-03-01T12:00:00.000Z  Line1/Pump/Speed     412.5  Good\n" +
		"2025-03-01T12:00:01.000Z  Line1/Pump/Speed     null  Bad_NotConnected\n" +
		"2025-03-01T12:00:02.000Z  Line1/Pump/Speed     413  Bad_Timeout  timeout: no answer\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
}

// TestTagsWatch_JSONAndFor: --json prints each value as one JSON line (the
// API's form, integers exact); --for ends the watch with exit 0.
func TestTagsWatch_JSONAndFor(t *testing.T) {
	clearEnv(t)
	shorten(t)
	d := newWSDaemon(t, func(ctx context.Context, c *websocket.Conn, _ int) {
		_ = wsjson.Write(ctx, c, values(tv("Line2/Pump/Speed", uint64(18446744073709551615), "Good", 0)))
		for ctx.Err() == nil {
			now := time.Now().UTC()
			_ = wsjson.Write(ctx, c, apitypes.WSMessage{Type: "heartbeat", Time: &now})
			time.Sleep(20 * time.Millisecond)
		}
	})
	start := time.Now()
	code, out, errOut := runCLI("--url", d.srv.URL, "--json", "tags", "watch", "--for", "300ms", "Line2/Pump/Speed")
	if code != 0 {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("--for 300ms took %s", el)
	}
	want := `{"path":"Line2/Pump/Speed","value":18446744073709551615,"quality":"Good","timestamp":"2025-03-01T12:00:00.000000000Z"}` + "\n"
	if out != want {
		t.Errorf("output %q, want %q", out, want)
	}
	if strings.Contains(errOut, "STALE") {
		t.Errorf("heartbeats every 20ms, yet stale: %q", errOut)
	}
}

// TestTagsWatch_StaleAndReconnect: a daemon that goes quiet makes the
// values stale (said on stderr); a dropped connection is retried, and the
// watch carries on with the new one.
func TestTagsWatch_StaleAndReconnect(t *testing.T) {
	clearEnv(t)
	shorten(t)
	d := newWSDaemon(t, func(ctx context.Context, c *websocket.Conn, n int) {
		switch n {
		case 0:
			_ = wsjson.Write(ctx, c, values(tv("Line1/Tank/Level", 51.5, "Good", 0)))
			time.Sleep(400 * time.Millisecond) // quiet: stale
			_ = c.CloseNow()                   // dropped, no close frame
		default:
			_ = wsjson.Write(ctx, c, values(tv("Line1/Tank/Level", 52, "Good", 5)))
			_ = c.Close(4001, "logged out")
		}
	})
	code, out, errOut := runCLI("--url", d.srv.URL, "tags", "watch", "Line1/Tank/Level")
	if code != 1 {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
	for _, want := range []string{"qubiqctl: STALE: no word from the daemon for", "qubiqctl: connection lost (", "qubiqctl: reconnected",
		"the daemon ended the watch: logged out"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if !strings.Contains(out, "Line1/Tank/Level  51.5  Good\n") || !strings.Contains(out, "Line1/Tank/Level  52  Good\n") {
		t.Errorf("output:\n%s", out)
	}
	if len(d.subs) != 2 {
		t.Errorf("%d connections, want 2", len(d.subs))
	}
}

// TestTagsWatch_Redraw: --redraw redraws the whole table in place (cursor
// home, clear screen), a row per tag (waiting until its first value),
// with the connection state under it.
func TestTagsWatch_Redraw(t *testing.T) {
	clearEnv(t)
	shorten(t)
	d := newWSDaemon(t, func(ctx context.Context, c *websocket.Conn, _ int) {
		_ = wsjson.Write(ctx, c, values(tv("Line1/Pump/Speed", 412.5, "Good", 0)))
		time.Sleep(50 * time.Millisecond)
		_ = c.Close(4001, "bye")
	})
	code, out, _ := runCLI("--url", d.srv.URL, "tags", "watch", "--redraw", "Line1/Pump/Speed", "Line2/Pump/Speed")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	frames := strings.Split(out, "\x1b[H\x1b[2J")
	if len(frames) < 2 {
		t.Fatalf("no redraw in %q", out)
	}
	lastFrame := frames[len(frames)-1]
	for _, want := range []string{"PATH              VALUE  QUALITY    TIMESTAMP", "Line1/Pump/Speed  412.5  Good       2025-03-01T12:00:00.000Z",
		"Line2/Pump/Speed         (waiting)", "2 tags; " + d.srv.URL + "  (Ctrl-C to stop)"} {
		if !strings.Contains(lastFrame, want) {
			t.Errorf("last frame lacks %q:\n%s", want, lastFrame)
		}
	}
}

// TestTagsWatch_Refused: refused credentials end the watch at once (exit
// 1, the problem), without retrying; too many tags are refused before
// connecting.
func TestTagsWatch_Refused(t *testing.T) {
	clearEnv(t)
	shorten(t)
	d := newWSDaemon(t, func(context.Context, *websocket.Conn, int) {})
	code, _, errOut := runCLI("--url", d.srv.URL, "--api-key", "revoked", "tags", "watch", "--all")
	if code != 1 || !strings.Contains(errOut, "invalid or revoked credentials (HTTP 401, unauthenticated)") {
		t.Errorf("exit %d stderr %q", code, errOut)
	}
	var many []apitypes.TagInfo
	for i := range wsMaxPaths + 1 {
		many = append(many, apitypes.TagInfo{Path: fmt.Sprintf("Big/T%d", i)})
	}
	body, _ := json.Marshal(many)
	f := newFakeDaemon(t, map[string]answer{"GET /api/v1/tags": {200, string(body)}})
	code, _, errOut = runCLI("--url", f.srv.URL, "tags", "watch", "Big")
	if code != 1 || !strings.Contains(errOut, "2001 tags chosen; one watch takes at most 2000") {
		t.Errorf("too many: exit %d stderr %q", code, errOut)
	}
	for _, r := range f.reqs {
		if r.path == "/api/v1/ws" {
			t.Error("connected although the selection was refused")
		}
	}
}
