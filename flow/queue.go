package flow

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
)

// Msg is one message travelling through a flow: a JSON object, kept as
// its encoding (what a Python node gets and returns), its decoded fields
// (what filters, tag writes and logs read), or both; each is made from
// the other when first needed.
type Msg struct {
	raw  json.RawMessage
	m    map[string]any
	ord  int // the trigger message's place in its batch (order at merges)
	size int // the bytes it holds while queued (sizeOf), set by push
}

// sizeOf estimates the bytes a message's fields hold: the lengths of its
// texts and JSON, and a little for each other value.
func sizeOf(v any) int {
	switch x := v.(type) {
	case json.RawMessage:
		return len(x)
	case string:
		return len(x) + 16
	case map[string]any:
		n := 48
		for k, e := range x {
			n += len(k) + 16 + sizeOf(e)
		}
		return n
	case []any:
		n := 24
		for _, e := range x {
			n += sizeOf(e)
		}
		return n
	}
	return 16
}

func (m *Msg) queuedSize() int {
	if m.raw != nil {
		return len(m.raw) + 64
	}
	return sizeOf(m.m) + 64
}

// newMsg is a message of fields m.
func newMsg(m map[string]any) *Msg { return &Msg{m: m} }

// rawMsg is a message of the JSON object raw (as a Python node returned
// it).
func rawMsg(raw json.RawMessage) *Msg { return &Msg{raw: raw} }

// bytes returns the message's JSON encoding.
func (m *Msg) bytes() (json.RawMessage, error) {
	if m.raw == nil {
		b, err := json.Marshal(m.m)
		if err != nil {
			return nil, err
		}
		m.raw = b
	}
	return m.raw, nil
}

// fields returns the message's decoded fields (numbers as json.Number).
func (m *Msg) fields() map[string]any {
	if m.m == nil {
		dec := json.NewDecoder(bytes.NewReader(m.raw))
		dec.UseNumber()
		var f map[string]any
		if err := dec.Decode(&f); err != nil || f == nil {
			f = map[string]any{}
		}
		m.m = f
	}
	return m.m
}

// set changes one field (the encoding is made again when needed).
func (m *Msg) set(k string, v any) {
	m.fields()[k] = v
	m.raw = nil
}

// get returns the field at a dotted path ("payload", "data.speed").
func (m *Msg) get(path string) (any, bool) {
	var cur any = m.fields()
	for part := range strings.SplitSeq(path, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[part]; !ok {
			return nil, false
		}
		if raw, isRaw := cur.(json.RawMessage); isRaw {
			// A value a trigger put in as JSON: decoded when read.
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				return nil, false
			}
			obj[part], cur = v, v
		}
	}
	return cur, true
}

// clone returns a copy that may be changed on its own (a message that goes
// down two outputs).
func (m *Msg) clone() *Msg {
	raw, err := m.bytes()
	if err != nil {
		return &Msg{m: m.m, ord: m.ord}
	}
	return &Msg{raw: raw, ord: m.ord}
}

// msgQueue is a flow's bounded queue: a ring of at most size messages.
// When full, drop_oldest makes room by dropping the oldest waiting
// message, drop_newest drops the message arriving. Its methods are safe
// for concurrent use; push never blocks.
type msgQueue struct {
	mu       sync.Mutex
	buf      []*Msg
	head, n  int
	bytes    int // what the waiting messages hold (Msg.size), at most MaxQueueBytes
	overflow string
	notify   chan struct{}
}

func newMsgQueue(size int, overflow string) *msgQueue {
	return &msgQueue{buf: make([]*Msg, size), overflow: overflow, notify: make(chan struct{}, 1)}
}

// push queues m and returns how many messages were dropped to do it (m
// itself under drop_newest, the oldest under drop_oldest) and whether m
// was queued.
//
// A queue holds at most MaxQueueBytes of messages as well: a message that
// does not fit beside the waiting ones counts as a full queue (drop_oldest
// drops as many of the oldest as it takes; a message larger than the
// whole limit is dropped itself), so a burst of large messages cannot
// exhaust the daemon's memory.
func (q *msgQueue) push(m *Msg) (dropped int, queued bool) {
	m.size = m.queuedSize()
	q.mu.Lock()
	full := func() bool { return q.n == len(q.buf) || (q.n > 0 && q.bytes+m.size > MaxQueueBytes) }
	if m.size > MaxQueueBytes || (full() && q.overflow == DropNewest) {
		q.mu.Unlock()
		return 1, false
	}
	for full() {
		q.bytes -= q.buf[q.head].size
		q.buf[q.head] = nil
		q.head = (q.head + 1) % len(q.buf)
		q.n--
		dropped++
	}
	q.buf[(q.head+q.n)%len(q.buf)] = m
	q.n++
	q.bytes += m.size
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
	return dropped, true
}

// pop takes up to max messages, oldest first.
func (q *msgQueue) pop(max int) []*Msg {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := min(max, q.n)
	if k == 0 {
		return nil
	}
	out := make([]*Msg, k)
	for i := range k {
		out[i] = q.buf[q.head]
		q.bytes -= out[i].size
		q.buf[q.head] = nil
		q.head = (q.head + 1) % len(q.buf)
	}
	q.n -= k
	return out
}

// len returns the messages waiting and the queue's size.
func (q *msgQueue) len() (n, size int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n, len(q.buf)
}

// resize gives the queue a new size and overflow policy, keeping the
// waiting messages in order; it returns how many of the oldest did not
// fit and were dropped.
func (q *msgQueue) resize(size int, overflow string) (dropped int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	old := make([]*Msg, q.n)
	for i := range q.n {
		old[i] = q.buf[(q.head+i)%len(q.buf)]
	}
	if len(old) > size {
		dropped = len(old) - size
		old = old[dropped:]
	}
	q.buf = make([]*Msg, size)
	copy(q.buf, old)
	q.head, q.n, q.overflow = 0, len(old), overflow
	q.bytes = 0
	for _, m := range old {
		q.bytes += m.size
	}
	return dropped
}

// clear drops every waiting message and returns how many there were.
func (q *msgQueue) clear() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.n
	for i := range q.buf {
		q.buf[i] = nil
	}
	q.head, q.n, q.bytes = 0, 0, 0
	return n
}

// nesting is how deep the JSON text b nests (objects and arrays within
// each other; 0 for a scalar). It reads brackets outside strings only and
// assumes b is valid JSON.
func nesting(b []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
