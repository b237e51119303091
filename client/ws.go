package client

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"qubiq.dev/edge/api/apitypes"
)

// The live-value WebSocket, GET /api/v1/ws (tag:read): a minimal RFC 6455
// client on the standard library, so that qubiqctl links no module outside
// the project. It speaks the protocol of apitypes.WSMessage: the client
// sends {"type": "subscribe", "paths": [...]}, the server answers a
// "values" snapshot, then "values" with changes and a "heartbeat" every few
// seconds; before it closes the socket for an ended session it sends
// {"type": "error", "reason"} and closes with code 4001.

// wsGUID is the key suffix of the opening handshake (RFC 6455 §1.3).
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// wsMaxMessage caps one message read from the server (16 MiB).
const wsMaxMessage = 16 << 20

// WS opcodes (RFC 6455 §5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// CloseSessionEnded is the close code the server sends when the session
// (or the credentials) of the socket ended: do not reconnect with them.
const CloseSessionEnded = 4001

// CloseError is the end of a WebSocket by a close frame: Code is the close
// code (RFC 6455 §7.4; 1000 normal, 1008 policy violation, 4001 session
// ended), Reason the server's text.
type CloseError struct {
	Code   int
	Reason string
}

// Error returns "websocket closed: CODE REASON".
func (e *CloseError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("websocket closed by the daemon (code %d)", e.Code)
	}
	return fmt.Sprintf("websocket closed by the daemon (code %d): %s", e.Code, e.Reason)
}

// Watch is one live-value WebSocket. Next reads its messages; Close ends
// it. Next must be called from one goroutine; Close may be called from any.
type Watch struct {
	conn   io.ReadWriteCloser
	br     *bufio.Reader
	stop   func() bool // stops the context watcher
	cancel func()      // ends the handshake request's context

	wmu    sync.Mutex // serialises frame writes
	closed bool
}

// Watch opens GET /api/v1/ws and subscribes to paths (at most 2000: the
// server closes the socket with code 1008 beyond that). The opening
// handshake is bounded by the http.Client's timeout; the socket then lives
// until Close or until ctx ends (which closes it). An error answer to the
// handshake (401, 403) is a *ProblemError.
func (c *Client) Watch(ctx context.Context, paths []string) (*Watch, error) {
	var keyb [16]byte
	if _, err := rand.Read(keyb[:]); err != nil {
		return nil, err
	}
	key := base64.StdEncoding.EncodeToString(keyb[:])
	hctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(hctx, http.MethodGet, c.base+path("ws"), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", key)
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	hc := c.upgradeClient()
	timeout := c.hc.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	timer := time.AfterFunc(timeout, cancel)
	resp, err := hc.Do(req)
	if !timer.Stop() && err == nil {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET %s: websocket handshake took longer than %s", path("ws"), timeout)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer cancel()
		defer resp.Body.Close()
		rb, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, problem(resp, rb)
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		cancel()
		return nil, errors.New("websocket: the HTTP client gave no connection for the upgrade")
	}
	sum := sha1.Sum([]byte(key + wsGUID))
	if !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") ||
		resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		conn.Close()
		cancel()
		return nil, errors.New("websocket: the daemon's handshake answer is not a WebSocket upgrade (Upgrade or Sec-WebSocket-Accept wrong)")
	}
	// The request's context stays live while the socket does; ctx ending
	// closes the socket, and closing the socket ends the context.
	w := &Watch{conn: conn, br: bufio.NewReader(conn), cancel: cancel}
	w.wmu.Lock()
	w.stop = context.AfterFunc(ctx, func() { w.shut() })
	w.wmu.Unlock()
	sub, err := json.Marshal(apitypes.WSMessage{Type: "subscribe", Paths: nonNil(paths)})
	if err != nil {
		w.Close()
		return nil, err
	}
	if err := w.writeFrame(opText, sub); err != nil {
		w.Close()
		return nil, fmt.Errorf("websocket: subscribe: %w", err)
	}
	return w, nil
}

// upgradeClient is the client's http.Client without its whole-request
// timeout (the socket outlives it) and speaking HTTP/1.1 only (an upgrade
// does not exist in HTTP/2).
func (c *Client) upgradeClient() *http.Client {
	hc := *c.hc
	hc.Timeout = 0
	var tr *http.Transport
	switch t := c.hc.Transport.(type) {
	case nil:
		tr = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		tr = t.Clone()
	default:
		return &hc
	}
	tr.ForceAttemptHTTP2 = false
	var p http.Protocols
	p.SetHTTP1(true)
	tr.Protocols = &p
	hc.Transport = tr
	return &hc
}

// Next returns the next message of the server. Pings are answered and
// skipped. A close frame ends the socket: Next answers it and returns a
// *CloseError; a broken connection returns its error.
func (w *Watch) Next() (apitypes.WSMessage, error) {
	var msg []byte
	var msgOp byte
	for {
		fin, op, payload, err := w.readFrame()
		if err != nil {
			return apitypes.WSMessage{}, err
		}
		switch op {
		case opPing:
			if err := w.writeFrame(opPong, payload); err != nil {
				return apitypes.WSMessage{}, err
			}
			continue
		case opPong:
			continue
		case opClose:
			ce := &CloseError{Code: 1005}
			if len(payload) >= 2 {
				ce.Code = int(binary.BigEndian.Uint16(payload))
				ce.Reason = string(payload[2:])
			}
			echo := payload
			if len(echo) > 2 {
				echo = echo[:2]
			}
			_ = w.writeFrame(opClose, echo)
			w.shut()
			return apitypes.WSMessage{}, ce
		case opText, opBinary:
			if msgOp != 0 {
				return apitypes.WSMessage{}, errors.New("websocket: a new message began inside a fragmented one")
			}
			msgOp, msg = op, payload
		case opContinuation:
			if msgOp == 0 {
				return apitypes.WSMessage{}, errors.New("websocket: continuation frame without a message")
			}
			if len(msg)+len(payload) > wsMaxMessage {
				return apitypes.WSMessage{}, fmt.Errorf("websocket: a message of the daemon is over %d bytes", wsMaxMessage)
			}
			msg = append(msg, payload...)
		default:
			return apitypes.WSMessage{}, fmt.Errorf("websocket: unknown opcode %#x", op)
		}
		if !fin {
			continue
		}
		var m apitypes.WSMessage
		if err := json.Unmarshal(msg, &m); err != nil {
			return apitypes.WSMessage{}, fmt.Errorf("websocket: the daemon's message is not JSON: %w", err)
		}
		return m, nil
	}
}

// readFrame reads one frame (RFC 6455 §5.2): FIN, opcode and the unmasked
// payload.
func (w *Watch) readFrame() (bool, byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(w.br, h[:]); err != nil {
		return false, 0, nil, err
	}
	fin, op := h[0]&0x80 != 0, h[0]&0x0F
	if h[0]&0x70 != 0 {
		return false, 0, nil, errors.New("websocket: reserved bits set (no extension was negotiated)")
	}
	masked := h[1]&0x80 != 0
	n := uint64(h[1] & 0x7F)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(w.br, b[:]); err != nil {
			return false, 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(w.br, b[:]); err != nil {
			return false, 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if op >= opClose && (n > 125 || !fin) {
		return false, 0, nil, errors.New("websocket: malformed control frame")
	}
	if n > wsMaxMessage {
		return false, 0, nil, fmt.Errorf("websocket: a frame of %d bytes is over %d", n, wsMaxMessage)
	}
	var mask [4]byte
	if masked {
		if _, err := io.ReadFull(w.br, mask[:]); err != nil {
			return false, 0, nil, err
		}
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(w.br, payload); err != nil {
		return false, 0, nil, err
	}
	if masked {
		for i := range payload {
			payload[i] ^= mask[i%4]
		}
	}
	return fin, op, payload, nil
}

// writeFrame writes one final, masked frame (a client masks every frame,
// RFC 6455 §5.3).
func (w *Watch) writeFrame(op byte, payload []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if w.closed {
		return errWatchClosed
	}
	hdr := make([]byte, 0, 14)
	hdr = append(hdr, 0x80|op)
	switch n := len(payload); {
	case n <= 125:
		hdr = append(hdr, 0x80|byte(n))
	case n <= 0xFFFF:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	var mask [4]byte
	if _, err := rand.Read(mask[:]); err != nil {
		return err
	}
	hdr = append(hdr, mask[:]...)
	buf := make([]byte, len(hdr)+len(payload))
	copy(buf, hdr)
	for i, b := range payload {
		buf[len(hdr)+i] = b ^ mask[i%4]
	}
	_, err := w.conn.Write(buf)
	return err
}

// errWatchClosed is returned by writes after Close.
var errWatchClosed = errors.New("websocket: closed")

// Close sends a normal close frame (code 1000) and closes the connection.
// Safe to call twice and from any goroutine.
func (w *Watch) Close() error {
	_ = w.writeFrame(opClose, []byte{0x03, 0xE8})
	w.shut()
	return nil
}

// shut closes the connection without a close frame.
func (w *Watch) shut() {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	if w.stop != nil {
		w.stop()
	}
	w.conn.Close()
	w.cancel()
}
