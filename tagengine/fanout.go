package tagengine

import (
	"sync"
	"sync/atomic"
)

// handoff is the room of a subscriber's channel itself. What waits beyond
// it waits in the subscriber's queue, which holds only what is pending, up
// to the subscription's bound: a channel of the whole bound would hold its
// memory for as long as the subscription lives (65,536 changes of ~130
// bytes are 8 MiB per subscriber, used or not).
const handoff = 64

// batch is one published set of changes (one scan's), shared by every
// subscriber that queues part of it and never written while shared. It is
// counted: publish holds one reference, each queued part another, and the
// last release returns it to batchPool, so a steady scan allocates none.
type batch struct {
	c    []Change
	refs atomic.Int32
}

var batchPool = sync.Pool{New: func() any { return new(batch) }}

// newBatch returns a batch holding a copy of cs, with one reference.
func newBatch(cs []Change) *batch {
	b := batchPool.Get().(*batch)
	b.c = append(b.c[:0], cs...)
	b.refs.Store(1)
	return b
}

func (b *batch) release() {
	if b.refs.Add(-1) != 0 {
		return
	}
	clear(b.c) // no values kept alive in the pool
	if cap(b.c) > 1<<17 {
		return // an outsized burst: let it go
	}
	b.c = b.c[:0]
	batchPool.Put(b)
}

// part is the queued rest of a batch.
type part struct {
	b  *batch
	cs []Change // a view of b.c
}

// subscriber is one subscription: publish offers it each batch of changes
// (one scan's), which it sends straight into ch while nothing waits, and
// otherwise queues, by reference: a burst is held once, however many
// subscribers wait on it. A pump goroutine moves the queue into ch, in
// order, as fast as the consumer takes them. Beyond limit pending changes
// the rest of a batch is dropped and counted.
type subscriber struct {
	ch      chan Change
	dropped atomic.Uint64
	warn    string // logged at the first drop
	// want, when set, filters the changes offered (Engine.SubscribeFunc).
	want func(path string) bool

	mu      sync.Mutex
	batches []part // waiting, oldest first
	pending int    // changes in batches
	limit   int    // the most changes batches hold
	// pumping is set while the pump delivers a batch: offer must then
	// queue behind it, not send past it.
	pumping bool
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

// offer hands a published batch to the subscriber and reports how many of
// its changes did not fit. While nothing waits they go straight into the
// channel, as far as it has room (delivered when offer returns); the rest,
// and everything while something waits, is queued in order, holding a
// reference to b.
func (s *subscriber) offer(b *batch) (lost int) {
	batch := b.c
	s.mu.Lock()
	if len(s.batches) == 0 && !s.pumping {
		i := 0
	direct:
		for ; i < len(batch); i++ {
			select {
			case s.ch <- batch[i]:
			default:
				break direct
			}
		}
		batch = batch[i:]
	}
	if room := s.limit - s.pending; room < len(batch) {
		lost = len(batch) - max(room, 0)
		batch = batch[:max(room, 0)]
	}
	if len(batch) > 0 {
		b.refs.Add(1)
		s.batches = append(s.batches, part{b, batch})
		s.pending += len(batch)
	}
	s.mu.Unlock()
	if len(batch) > 0 {
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
			if len(s.batches) == 0 {
				s.pumping = false
				s.batches = nil // let a long queue's array go
				s.mu.Unlock()
				break
			}
			p := s.batches[0]
			s.batches[0] = part{}
			s.batches = s.batches[1:]
			s.pumping = true
			s.mu.Unlock()
			for _, c := range p.cs {
				select {
				case s.ch <- c:
				case <-s.stop:
					return
				}
			}
			p.b.release()
			s.mu.Lock()
			s.pending -= len(p.cs)
			s.mu.Unlock()
		}
	}
}

// close ends the pump; the channel stays open (consumers select on their
// own stop).
func (s *subscriber) close() { s.once.Do(func() { close(s.stop) }) }
