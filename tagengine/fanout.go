package tagengine

import (
	"sync"
	"sync/atomic"
)

// handoff is the room of a subscriber's channel itself. What waits beyond
// it waits in the subscriber's queue, which holds only what is pending and
// grows up to the subscription's bound: a channel of the whole bound would
// hold its memory for as long as the subscription lives (65,536 changes of
// ~120 bytes are 7.5 MiB per subscriber, used or not).
const handoff = 64

// subscriber is one subscription: publish appends to q (bounded by limit,
// the rest dropped and counted) and a pump goroutine moves q into ch, in
// order, as fast as the consumer takes them.
type subscriber struct {
	ch      chan Change
	dropped atomic.Uint64
	warn    string // logged at the first drop

	mu    sync.Mutex
	q     []Change
	spare []Change // the pump's last batch, reused
	// pumping is set while the pump delivers a batch: offer must then
	// queue behind it, not send past it.
	pumping bool
	limit   int // the most changes q holds
	wake    chan struct{}
	stop    chan struct{}
	once    sync.Once
}

// newSubscriber returns a started subscriber with room for about buf
// pending changes: handoff of them in the channel, the rest in the queue.
func newSubscriber(buf int, warn string) *subscriber {
	buf = max(buf, 1)
	h := min(buf, handoff)
	s := &subscriber{ch: make(chan Change, h), limit: max(buf-h, 1), warn: warn,
		wake: make(chan struct{}, 1), stop: make(chan struct{})}
	go s.pump()
	return s
}

// offer hands changes to the subscriber and reports how many of them did
// not fit. While nothing waits in the queue they go straight into the
// channel, as far as it has room (delivered when offer returns); the rest,
// and everything while the queue is not empty, waits in the queue, in
// order.
func (s *subscriber) offer(changes []Change) (lost int) {
	s.mu.Lock()
	if len(s.q) == 0 && !s.pumping {
		i := 0
	direct:
		for ; i < len(changes); i++ {
			select {
			case s.ch <- changes[i]:
			default:
				break direct
			}
		}
		changes = changes[i:]
	}
	room := s.limit - len(s.q)
	if room < len(changes) {
		lost = len(changes) - max(room, 0)
		changes = changes[:max(room, 0)]
	}
	s.q = append(s.q, changes...)
	s.mu.Unlock()
	if len(changes) > 0 {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return lost
}

func (s *subscriber) pump() {
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			batch := s.q
			if len(batch) == 0 {
				s.pumping = false
				s.mu.Unlock()
				break
			}
			s.q = s.spare[:0]
			s.spare = nil
			s.pumping = true
			s.mu.Unlock()
			for _, c := range batch {
				select {
				case s.ch <- c:
				case <-s.stop:
					return
				}
			}
			clear(batch) // no references kept to delivered values
			// Keep the batch for reuse unless a burst made it much larger
			// than what usually waits.
			if cap(batch) > 4096 && cap(batch) > 4*len(batch) {
				batch = nil
			}
			s.mu.Lock()
			s.spare = batch
			s.mu.Unlock()
		}
	}
}

// close ends the pump; the channel stays open (consumers select on their
// own stop).
func (s *subscriber) close() { s.once.Do(func() { close(s.stop) }) }
