package client

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"qubiq.dev/edge/api/apitypes"
)

// TestWatch_AgainstCoderWebsocket runs the client against the WebSocket
// library the daemon serves /api/v1/ws with: the handshake carries the
// API key, the subscribe message arrives, snapshots and heartbeats come
// back decoded (integers exact), and a server ping is answered.
func TestWatch_AgainstCoderWebsocket(t *testing.T) {
	got := make(chan apitypes.WSMessage, 1)
	pinged := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/ws" || r.Header.Get("Authorization") != "Bearer k1" {
			http.Error(w, `{"status":401,"kind":"unauthenticated","detail":"no"}`, http.StatusUnauthorized)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		var sub apitypes.WSMessage
		if err := wsjson.Read(ctx, c, &sub); err != nil {
			return
		}
		got <- sub
		vals := []apitypes.TagValue{{Path: "Line1/Big", Value: uint64(18446744073709551615), Quality: "Good",
			Timestamp: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}}
		_ = wsjson.Write(ctx, c, apitypes.WSMessage{Type: "values", Values: vals})
		// Ping needs a reader running on this side to see the pong.
		rctx := c.CloseRead(ctx)
		pctx, cancel := context.WithTimeout(rctx, 5*time.Second)
		pinged <- c.Ping(pctx)
		cancel()
		now := time.Date(2025, 3, 1, 12, 0, 5, 0, time.UTC)
		_ = wsjson.Write(ctx, c, apitypes.WSMessage{Type: "heartbeat", Time: &now})
		<-rctx.Done()
	}))
	defer srv.Close()
	c, err := New(srv.URL, "k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := c.Watch(ctx, []string{"Line1/Big", "Line1/Gone"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if sub := <-got; sub.Type != "subscribe" || strings.Join(sub.Paths, ",") != "Line1/Big,Line1/Gone" {
		t.Errorf("the server got %+v", sub)
	}
	m, err := w.Next()
	if err != nil {
		t.Fatal(err)
	}
	if m.Type != "values" || len(m.Values) != 1 || m.Values[0].Value != uint64(18446744073709551615) {
		t.Errorf("first message %+v", m)
	}
	// The pong is sent while Next reads: read the heartbeat that follows.
	m, err = w.Next()
	if err != nil {
		t.Fatal(err)
	}
	if m.Type != "heartbeat" || m.Time == nil || !m.Time.Equal(time.Date(2025, 3, 1, 12, 0, 5, 0, time.UTC)) {
		t.Errorf("second message %+v", m)
	}
	if err := <-pinged; err != nil {
		t.Errorf("server ping: %v (the client did not answer it)", err)
	}
}

// rawServer accepts the handshake by hand and then runs fn on the raw
// connection, to send frames the library would not (fragments, a close
// code of our choosing).
func rawServer(t *testing.T, fn func(bw *bufio.ReadWriter)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Sec-WebSocket-Key")
		sum := sha1.Sum([]byte(key + wsGUID))
		conn, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		bw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Accept: " + base64.StdEncoding.EncodeToString(sum[:]) + "\r\n\r\n")
		bw.Flush()
		fn(bw)
		bw.Flush()
		time.Sleep(100 * time.Millisecond)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// frame is an unmasked server frame.
func frame(fin bool, op byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	switch n := len(payload); {
	case n <= 125:
		out = append(out, byte(n))
	default:
		out = append(out, 126, byte(n>>8), byte(n))
	}
	return append(out, payload...)
}

// TestWatch_FragmentsAndClose: a message in three fragments (one of them
// over 125 bytes) with a ping between them is put together, and a close
// frame with code 4001 ends Next with a *CloseError carrying code and
// reason.
func TestWatch_FragmentsAndClose(t *testing.T) {
	msg, _ := json.Marshal(apitypes.WSMessage{Type: "error", Reason: strings.Repeat("x", 300)})
	srv := rawServer(t, func(bw *bufio.ReadWriter) {
		bw.Write(frame(false, opText, msg[:10]))
		bw.Write(frame(true, opPing, []byte("p")))
		bw.Write(frame(false, opContinuation, msg[10:200]))
		bw.Write(frame(true, opContinuation, msg[200:]))
		bw.Write(frame(true, opClose, append([]byte{0x0F, 0xA1}, "session ended"...)))
	})
	c, _ := New(srv.URL, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := c.Watch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	m, err := w.Next()
	if err != nil {
		t.Fatal(err)
	}
	if m.Type != "error" || len(m.Reason) != 300 {
		t.Errorf("message %q/%d", m.Type, len(m.Reason))
	}
	_, err = w.Next()
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Code != CloseSessionEnded || ce.Reason != "session ended" {
		t.Fatalf("Next after close = %v, want CloseError 4001 \"session ended\"", err)
	}
}

// TestWatch_HandshakeRefused: an error answer to the handshake is a
// *ProblemError with its status and kind.
func TestWatch_HandshakeRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"type":"t","title":"Forbidden","status":403,"detail":"missing scope \"tag:read\"","kind":"permission_denied"}`))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "k", nil)
	_, err := c.Watch(context.Background(), []string{"A"})
	var pe *ProblemError
	if !errors.As(err, &pe) || pe.Status != 403 || pe.Kind != "permission_denied" {
		t.Fatalf("err = %v, want a 403 problem", err)
	}
}

// TestWatch_ContextEndsIt: ending the context unblocks a Next waiting for
// a message.
func TestWatch_ContextEndsIt(t *testing.T) {
	srv := rawServer(t, func(bw *bufio.ReadWriter) { time.Sleep(5 * time.Second) })
	c, _ := New(srv.URL, "", nil)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Watch(ctx, []string{"A"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := w.Next(); done <- err }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Next returned no error after the context ended")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Next still blocked after the context ended")
	}
}
