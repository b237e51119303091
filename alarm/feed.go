package alarm

import "sync/atomic"

// feed is the engine's subscription to its Source.
type feed struct {
	ch      <-chan Change
	dropped func() uint64
	cancel  func()
	seen    atomic.Uint64 // dropped() when last looked at
}

// lost returns the changes the source dropped since the last call.
func (f *feed) lost() uint64 {
	d := f.dropped()
	return d - f.seen.Swap(d)
}

// syncFeedLocked subscribes to the source while the engine runs and has
// alarms, and lets go of the subscription otherwise: with no alarm, every
// change of every tag would be handed over only to be ignored. What the
// last subscription lost and nobody counted yet is counted. The loop is
// woken to take the new feed.
func (e *Engine) syncFeedLocked() {
	want := e.running && len(e.insts) > 0
	switch {
	case want && e.feed == nil:
		ch, dropped, cancel := e.opts.Source.Subscribe(e.set.FeedBuffer, e.watches)
		f := &feed{ch: ch, dropped: dropped, cancel: cancel}
		f.seen.Store(dropped())
		e.feed = f
	case !want && e.feed != nil:
		e.feed.cancel()
		e.feedDropped.Add(e.feed.lost())
		e.feed = nil
	default:
		return
	}
	select {
	case e.kick <- struct{}{}:
	default:
	}
}
