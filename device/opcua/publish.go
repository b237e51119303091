package opcua

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/gopcua/opcua/ua"

	"qubiq.dev/edge/value"
)

// maxRepublish bounds the Republish requests sent to fill one gap.
const maxRepublish = 32

type pubResult struct {
	req *ua.PublishRequest
	res *ua.PublishResponse
	err error
}

// publishLoop keeps publish requests at the server while the session has
// subscriptions, acknowledges what arrives, fills sequence gaps with
// Republish, delivers data changes, and watches each subscription: one
// silent for (keep-alive count + 1) publishing intervals fails the session
// so the run loop rebuilds it (docs/opcua.md, fault C11). It is the driver's own
// publish loop, because gopcua v0.8.0's runs only under Client.Connect's
// monitor, whose restore path loses the subscriptions (see connect).
func (s *session) publishLoop(ctx context.Context) {
	results := make(chan pubResult)
	inflight, limit := 0, maxPublishInFlight
	var acks []*ua.SubscriptionAcknowledgement
	var pauseUntil time.Time
	tick := time.NewTicker(s.watchdogTick())
	defer tick.Stop()
	// Subscriptions that survived a re-activation start their watch now.
	now := time.Now()
	for _, g := range s.d.groupsSnapshot() {
		g.mu.Lock()
		if g.uaSess == s.s {
			g.lastSeen = now
		}
		g.mu.Unlock()
	}
	for {
		want := 0
		if n := s.liveSubs(); n > 0 && time.Now().After(pauseUntil) {
			want = min(n+1, limit)
		}
		for inflight < want {
			req := &ua.PublishRequest{SubscriptionAcknowledgements: acks}
			acks = nil
			inflight++
			go func() {
				res, err := send[*ua.PublishResponse](ctx, s, 0, req)
				select {
				case results <- pubResult{req: req, res: res, err: err}:
				case <-ctx.Done():
				}
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.subsChanged:
		case <-tick.C:
			if err := s.watchdog(time.Now()); err != nil {
				s.fail(err)
				return
			}
		case r := <-results:
			inflight--
			if r.err != nil {
				acks = append(acks, r.req.SubscriptionAcknowledgements...)
				if ctx.Err() != nil {
					return
				}
				switch {
				case errors.Is(r.err, ua.StatusBadTimeout):
				case errors.Is(r.err, ua.StatusBadTooManyPublishRequests):
					limit = max(1, inflight)
				case errors.Is(r.err, ua.StatusBadNoSubscription):
					// The server has none of ours: the maintainer re-creates them.
					pauseUntil = time.Now().Add(s.minInterval())
					s.d.kickMaintain()
				case errors.Is(r.err, ua.StatusBadSubscriptionIDInvalid):
					pauseUntil = time.Now().Add(s.minInterval())
					s.d.kickMaintain()
				case isConnErr(r.err):
					s.fail(fmt.Errorf("publish: %w", r.err))
					return
				default:
					s.d.log.Warn("opcua: publish failed", slog.String("error", r.err.Error()))
					pauseUntil = time.Now().Add(s.minInterval())
				}
				continue
			}
			acks = append(acks, s.handlePublish(ctx, r.res)...)
		}
	}
}

// liveSubs counts the groups with a subscription in this session.
func (s *session) liveSubs() int {
	n := 0
	for _, g := range s.d.groupsSnapshot() {
		g.mu.Lock()
		if g.uaSess == s.s && g.subID != 0 {
			n++
		}
		g.mu.Unlock()
	}
	return n
}

func (s *session) minInterval() time.Duration {
	iv := time.Duration(s.d.cfg.PublishingInterval)
	for _, g := range s.d.groupsSnapshot() {
		g.mu.Lock()
		if g.uaSess == s.s && g.subID != 0 && g.interval > 0 {
			iv = min(iv, g.interval)
		}
		g.mu.Unlock()
	}
	return iv
}

func (s *session) watchdogTick() time.Duration {
	return max(time.Duration(s.d.cfg.PublishingInterval)/4, 10*time.Millisecond)
}

// watchdog returns an error when a subscription of this session has had
// no publish response (data or keep-alive) for (keep-alive count + 1)
// publishing intervals.
func (s *session) watchdog(now time.Time) error {
	for _, g := range s.d.groupsSnapshot() {
		g.mu.Lock()
		owned := g.uaSess == s.s && g.subID != 0 && !g.removed
		silent := time.Duration(g.keepAlive+1) * g.interval
		quiet := now.Sub(g.lastSeen)
		subID := g.subID
		g.mu.Unlock()
		if owned && quiet > silent {
			return fmt.Errorf("server silent: no publish response for subscription %d in %s (%d publishing intervals of %s)",
				subID, quiet.Round(time.Millisecond), g.keepAlive+1, g.interval)
		}
	}
	return nil
}

func (s *session) groupOf(subID uint32) *group {
	for _, g := range s.d.groupsSnapshot() {
		g.mu.Lock()
		ok := g.uaSess == s.s && g.subID == subID
		g.mu.Unlock()
		if ok {
			return g
		}
	}
	return nil
}

// handlePublish processes one publish response and returns the
// acknowledgements to send with the next request.
func (s *session) handlePublish(ctx context.Context, res *ua.PublishResponse) []*ua.SubscriptionAcknowledgement {
	msg := res.NotificationMessage
	if msg == nil {
		return nil
	}
	var acks []*ua.SubscriptionAcknowledgement
	data := len(msg.NotificationData) > 0
	s.d.published(data)
	if data {
		acks = append(acks, &ua.SubscriptionAcknowledgement{SubscriptionID: res.SubscriptionID, SequenceNumber: msg.SequenceNumber})
	}
	g := s.groupOf(res.SubscriptionID)
	if g == nil {
		return acks
	}
	g.mu.Lock()
	g.lastSeen = time.Now()
	last := g.lastSeq
	g.mu.Unlock()
	// A keep-alive carries the next sequence number; a data message its own.
	next := msg.SequenceNumber
	if last != 0 && next > last+1 {
		for seq := last + 1; seq < next && seq-last <= maxRepublish; seq++ {
			if !slices.Contains(res.AvailableSequenceNumbers, seq) {
				continue
			}
			m, err := s.republish(ctx, res.SubscriptionID, seq)
			if err != nil {
				s.d.log.Info("opcua: republish failed", slog.Uint64("sequence", uint64(seq)), slog.String("error", err.Error()))
				continue
			}
			s.deliverMessage(g, m)
			acks = append(acks, &ua.SubscriptionAcknowledgement{SubscriptionID: res.SubscriptionID, SequenceNumber: seq})
		}
	}
	if data {
		s.deliverMessage(g, msg)
		g.mu.Lock()
		if msg.SequenceNumber > g.lastSeq {
			g.lastSeq = msg.SequenceNumber
		}
		g.mu.Unlock()
	}
	return acks
}

// republish asks the server for a notification message again (OPC UA Part
// 4 §5.13.6).
func (s *session) republish(ctx context.Context, subID, seq uint32) (*ua.NotificationMessage, error) {
	res, err := send[*ua.RepublishResponse](ctx, s, time.Duration(s.d.cfg.Timeout),
		&ua.RepublishRequest{SubscriptionID: subID, RetransmitSequenceNumber: seq})
	if err != nil {
		return nil, err
	}
	if res.NotificationMessage == nil {
		return nil, errors.New("republish: no message")
	}
	return res.NotificationMessage, nil
}

// deliverMessage hands the data changes of one notification message to g.
// Order is the subscription's, never a device clock's (Part 4 §5.13.1.1:
// the sequence number orders the notification messages of a subscription):
// a value from a message older than the one last delivered for its item
// (a late response of a concurrent publish request, a republished message
// already overtaken) is dropped and logged, so values never go back; the
// source timestamp is kept as data, and a device clock ahead of the
// gateway's (a notification stamped in the future) never holds later
// values back.
func (s *session) deliverMessage(g *group, msg *ua.NotificationMessage) {
	for _, eo := range msg.NotificationData {
		if eo == nil {
			continue
		}
		switch n := eo.Value.(type) {
		case *ua.DataChangeNotification:
			for _, mi := range n.MonitoredItems {
				if mi == nil {
					continue
				}
				i := int(mi.ClientHandle) - 1
				if i < 0 || i >= len(g.points) {
					continue
				}
				v := vqtOf(mi.Value, g.points[i].Type)
				g.mu.Lock()
				it := &g.items[i]
				stale := it.hasSeq && seqBefore(msg.SequenceNumber, it.lastSeq)
				if !stale {
					it.lastSeq, it.hasSeq = msg.SequenceNumber, true
					it.marked, it.markWhy = 0, ""
					if mi.Value != nil && isNodeGone(mi.Value.Status) {
						it.status = mi.Value.Status
					} else if it.live {
						it.status = 0
					}
				}
				g.mu.Unlock()
				if stale {
					s.d.log.Debug("opcua: out-of-order value dropped", slog.String("tag", g.points[i].Tag))
					continue
				}
				if v.Quality == value.BadNodeIDUnknown {
					s.d.log.Warn("opcua: monitored node vanished", slog.String("tag", g.points[i].Tag),
						slog.String("address", g.points[i].Address))
					s.d.countItems()
				}
				s.d.stats.dataChanges.Add(1)
				g.deliver(i, v)
			}
		case *ua.StatusChangeNotification:
			// The subscription ended on the server (BadTimeout: its lifetime
			// ran out): re-create it.
			if StatusQuality(uint32(n.Status)) != value.Good {
				s.d.log.Warn("opcua: subscription status changed", slog.String("status", StatusName(uint32(n.Status))))
				g.mu.Lock()
				g.subID = 0
				g.mu.Unlock()
				s.d.kickMaintain()
			}
		}
	}
}

// seqBefore reports whether sequence number a comes before b in a
// subscription's sequence, which wraps from 4294967295 to 1 (Part 4
// §7.38): serial number arithmetic (RFC 1982) on 32 bits.
func seqBefore(a, b uint32) bool { return int32(a-b) < 0 }
