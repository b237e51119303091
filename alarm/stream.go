package alarm

import "sync/atomic"

// The transition stream: every committed transition, for the WebSocket,
// the MQTT link (alarms/<path> through the outbox) and flow triggers.

type subscriber struct {
	ch      chan Transition
	dropped atomic.Uint64
}

// Subscribe returns a channel that receives every transition of every
// alarm, in commit order, with room for buf of them, and a function that
// ends the subscription (it may be called more than once). The engine
// never waits for a subscriber: a transition that finds the channel full
// is lost for it and counted by dropped (and in Metrics); a subscriber that
// sees the count rise takes a fresh List. The channel is not closed.
func (e *Engine) Subscribe(buf int) (ch <-chan Transition, dropped func() uint64, cancel func()) {
	s := &subscriber{ch: make(chan Transition, max(buf, 1))}
	e.mu.Lock()
	id := e.nextSub
	e.nextSub++
	e.subs[id] = s
	e.mu.Unlock()
	return s.ch, s.dropped.Load, func() {
		e.mu.Lock()
		delete(e.subs, id)
		e.mu.Unlock()
	}
}

// publish hands the transitions to the subscribers without blocking; the
// caller holds e.mu (so every subscriber sees commit order).
func (e *Engine) publish(ts []Transition) {
	if len(ts) == 0 {
		return
	}
	for _, s := range e.subs {
		for _, t := range ts {
			select {
			case s.ch <- t:
			default:
				s.dropped.Add(1)
				e.subDropped.Add(1)
			}
		}
	}
}
