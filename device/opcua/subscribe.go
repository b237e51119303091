package opcua

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// Subscription parameters (OPC UA Part 4 §5.13.2). With a keep-alive count
// of 2 the server answers a publish request at least every 2 publishing
// intervals, so a subscription silent for 3 intervals means a dead or
// blocked server: the session is rebuilt (docs/architecture.md, Rules from the field; the
// gopcua v0.8.0 watchdog gap of docs/opcua.md, fault C11).
const (
	keepAliveCount = 2
	// maxPublishInFlight bounds the publish requests kept at the server.
	maxPublishInFlight = 5
)

// Deadband is the data change filter of one monitored item (OPC UA Part 4
// §7.22.2; docs/project.md, Project file: deadband {absolute: x} or {percent:
// x}). Percent needs the node's EURange; a server that refuses the filter
// gets the item without it (logged).
type Deadband struct {
	Absolute float64 `json:"absolute,omitempty"`
	Percent  float64 `json:"percent,omitempty"`
}

// SubscribeOptions tune one subscription (one scan class). Zero fields take
// the defaults: PublishingInterval the config's publishing_interval,
// SamplingInterval the publishing interval, QueueSize 1 (with discard
// oldest). Deadbands is nil or holds one Deadband per point.
type SubscribeOptions struct {
	PublishingInterval time.Duration
	SamplingInterval   time.Duration
	QueueSize          uint32
	Deadbands          []Deadband
}

// group is one Subscribe call: one OPC UA subscription with a monitored
// item per point.
type group struct {
	d      *Driver
	opts   SubscribeOptions
	points []device.Point
	addrs  []*NodeAddress // nil for an address that does not parse
	fn     func(int, value.VQT)

	deliverMu sync.Mutex // serialises calls of fn

	mu        sync.Mutex // guards the fields below
	uaSess    *opcua.Session
	subID     uint32
	interval  time.Duration
	keepAlive uint32
	lastSeen  time.Time
	lastSeq   uint32
	items     []item
	removed   bool
	// pollSess is the session in which the server refused a subscription
	// for g (BadTooManySubscriptions, BadServiceUnsupported): g is polled
	// with Read there instead.
	pollSess *opcua.Session
	lastPoll time.Time
}

// item is the state of one point's monitored item.
type item struct {
	monID    uint32
	live     bool          // created on the server, in this subscription
	status   ua.StatusCode // the last bad status (refused, or notified bad node)
	noFilter bool          // the server refused the deadband filter
	lastSeq  uint32        // sequence number of the notification message last delivered for it
	hasSeq   bool          // lastSeq is set (in the current subscription)
	marked   value.Quality // quality of the last failure mark delivered
	markWhy  string
	polled   bool      // the server cannot monitor it: polled with Read
	lastRead value.VQT // last polled value delivered
	hasRead  bool
}

// pollSubStatus are the refusals of CreateSubscription after which a group
// is polled with Read instead; pollItemStatus the same for one monitored
// item (the issue's "tags on servers or nodes that cannot be monitored are
// polled with Read instead").
var (
	pollSubStatus = map[ua.StatusCode]bool{
		ua.StatusBadTooManySubscriptions: true,
		ua.StatusBadServiceUnsupported:   true,
		ua.StatusBadNotSupported:         true,
		ua.StatusBadNotImplemented:       true,
	}
	pollItemStatus = map[ua.StatusCode]bool{
		ua.StatusBadTooManyMonitoredItems: true,
		ua.StatusBadNotSupported:          true,
		ua.StatusBadMonitoringModeInvalid: true,
	}
)

// Subscribe monitors points with the default SubscribeOptions; see
// SubscribeWith.
func (d *Driver) Subscribe(ctx context.Context, points []device.Point, fn func(i int, v value.VQT)) error {
	return d.SubscribeWith(ctx, SubscribeOptions{}, points, fn)
}

// SubscribeInterval monitors points with interval as both the sampling and
// the publishing interval (one scan class; device.IntervalSubscriber).
func (d *Driver) SubscribeInterval(ctx context.Context, interval time.Duration, points []device.Point, fn func(i int, v value.VQT)) error {
	return d.SubscribeWith(ctx, SubscribeOptions{PublishingInterval: interval, SamplingInterval: interval}, points, fn)
}

// SubscribeWith makes one subscription with a monitored item per point
// (sampling interval, queue size 1, discard oldest, optional deadband) and
// delivers each change to fn(i, vqt) until ctx ends; then the subscription
// is deleted on the server. It returns at once; the subscription is made on
// the current session, and re-made on every new one. A point whose address
// does not parse gets Bad_ConfigurationError at once; a node the server
// refuses gets its status's quality (Bad_NodeIdUnknown, ...) and is retried
// at each reconciliation while the others flow (docs/opcua.md, fault C12, C13).
// While disconnected every point gets the outage's quality. fn is called
// from one goroutine at a time and must return quickly: it holds up the
// session's publish loop.
func (d *Driver) SubscribeWith(ctx context.Context, opts SubscribeOptions, points []device.Point, fn func(i int, v value.VQT)) error {
	if opts.Deadbands != nil && len(opts.Deadbands) != len(points) {
		return fmt.Errorf("device %q: subscribe: %d deadbands for %d points", d.name, len(opts.Deadbands), len(points))
	}
	if opts.PublishingInterval <= 0 {
		opts.PublishingInterval = time.Duration(d.cfg.PublishingInterval)
	}
	if opts.SamplingInterval <= 0 {
		opts.SamplingInterval = opts.PublishingInterval
	}
	if opts.QueueSize == 0 {
		opts.QueueSize = 1
	}
	g := &group{d: d, opts: opts, points: append([]device.Point(nil), points...), fn: fn,
		addrs: make([]*NodeAddress, len(points)), items: make([]item, len(points))}
	now := time.Now().UTC()
	for i, p := range points {
		a, err := d.parse(p)
		if err != nil {
			g.deliver(i, value.Bad(value.BadConfigurationError, err.Error(), now))
			continue
		}
		g.addrs[i] = &a
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return fmt.Errorf("device %q: subscribe: driver closed", d.name)
	}
	d.groups[g] = struct{}{}
	up, q, why := d.sess != nil, d.downQ, d.downWhy
	d.mu.Unlock()
	if !up {
		g.markDown(q, why)
	}
	d.kickMaintain()
	go func() {
		select {
		case <-ctx.Done():
		case <-d.closing:
		}
		g.mu.Lock()
		g.removed = true
		g.mu.Unlock()
		d.kickMaintain()
	}()
	return nil
}

func (d *Driver) kickMaintain() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// groupList returns the groups; the caller holds d.mu.
func (d *Driver) groupList() []*group {
	out := make([]*group, 0, len(d.groups))
	for g := range d.groups {
		out = append(out, g)
	}
	return out
}

func (d *Driver) groupsSnapshot() []*group {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.groupList()
}

// deliver calls fn, one call at a time, until the group is removed.
func (g *group) deliver(i int, v value.VQT) {
	g.deliverMu.Lock()
	defer g.deliverMu.Unlock()
	g.mu.Lock()
	removed := g.removed
	g.mu.Unlock()
	if !removed {
		g.fn(i, v)
	}
}

// markDown gives every valid point the outage's quality, once per change of
// quality or reason.
func (g *group) markDown(q value.Quality, why string) {
	now := time.Now().UTC()
	var idx []int
	g.mu.Lock()
	if g.removed {
		g.mu.Unlock()
		return
	}
	for i := range g.items {
		it := &g.items[i]
		it.hasRead, it.hasSeq = false, false
		if g.addrs[i] == nil || (it.marked == q && it.markWhy == why) {
			continue
		}
		it.marked, it.markWhy = q, why
		idx = append(idx, i)
	}
	g.mu.Unlock()
	for _, i := range idx {
		g.deliver(i, value.Bad(q, why, now))
	}
}

// markItem delivers a failure of item i (a refused monitored item, a
// namespace the server lacks) once per change.
func (g *group) markItem(i int, q value.Quality, why string, code uint32) {
	g.mu.Lock()
	it := &g.items[i]
	if it.marked == q && it.markWhy == why {
		g.mu.Unlock()
		return
	}
	it.marked, it.markWhy = q, why
	g.mu.Unlock()
	v := value.Bad(q, why, time.Now())
	v.StatusCode = code
	g.deliver(i, v)
}

// maintain reconciles the subscriptions of every group with the server:
// at the start of the session, when a group comes or goes, and every
// reconcile period.
func (s *session) maintain(ctx context.Context) {
	every := min(max(10*time.Duration(s.d.cfg.PublishingInterval), time.Second), time.Minute)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.d.kick:
		case <-t.C:
		}
		if err := s.reconcile(ctx); err != nil {
			if ctx.Err() == nil && isConnErr(err) {
				s.fail(err)
			}
			if ctx.Err() != nil || isConnErr(err) {
				return
			}
			s.d.log.Warn("opcua: subscription maintenance failed", slog.String("error", err.Error()))
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(every)
	}
}

// reconcile brings every group's subscription on this session in line with
// what is configured (docs/architecture.md, Rules from the field: a connection counts its
// live monitored items against the configured ones and rebuilds what is
// missing), and updates the driver's count of bad items for State.
func (s *session) reconcile(ctx context.Context) error {
	var firstErr error
	for _, g := range s.d.groupsSnapshot() {
		g.mu.Lock()
		removed, owned, subID := g.removed, g.uaSess == s.s && g.subID != 0, g.subID
		polled := g.pollSess == s.s
		g.mu.Unlock()
		if polled && !removed {
			continue
		}
		var err error
		switch {
		case removed:
			if owned {
				err = s.deleteSub(ctx, subID)
			}
			s.d.mu.Lock()
			delete(s.d.groups, g)
			s.d.mu.Unlock()
		case !owned:
			err = s.createSub(ctx, g)
		default:
			err = s.verifySub(ctx, g)
		}
		if err != nil {
			if isConnErr(err) {
				return err
			}
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	s.signalSubs()
	s.d.countItems()
	return firstErr
}

// countItems updates the number of configured and bad monitored items.
func (d *Driver) countItems() {
	bad, all, first := 0, 0, ""
	for _, g := range d.groupsSnapshot() {
		g.mu.Lock()
		for i, it := range g.items {
			if g.removed {
				break
			}
			all++
			if g.addrs[i] == nil || (!it.live && !it.polled) || it.status != 0 {
				bad++
				if first == "" {
					code := it.status
					why := it.markWhy
					if code != 0 {
						why = statusReason(code)
					}
					if why == "" {
						why = "not monitored"
					}
					first = g.points[i].Tag + " " + g.points[i].Address + ": " + why
				}
			}
		}
		g.mu.Unlock()
	}
	d.mu.Lock()
	d.badItems, d.allItems, d.badFirst = bad, all, first
	d.mu.Unlock()
}

// createSub creates g's subscription on this session and its monitored
// items. The lifetime count covers the session timeout, so the
// subscription outlives an outage that the session survives (C11).
func (s *session) createSub(ctx context.Context, g *group) error {
	iv := g.opts.PublishingInterval
	lifetime := uint32(math.Ceil(float64(s.revised)/float64(iv))) + 1
	lifetime = max(lifetime, 3*keepAliveCount)
	req := &ua.CreateSubscriptionRequest{
		RequestedPublishingInterval: float64(iv) / float64(time.Millisecond),
		RequestedLifetimeCount:      lifetime,
		RequestedMaxKeepAliveCount:  keepAliveCount,
		PublishingEnabled:           true,
	}
	res, err := send[*ua.CreateSubscriptionResponse](ctx, s, time.Duration(s.d.cfg.Timeout), req)
	if err != nil {
		if code, ok := asStatus(err); ok && pollSubStatus[code&codeMask] {
			s.d.log.Warn("opcua: the server refused a subscription; polling its tags with Read",
				slog.String("status", StatusName(uint32(code))), slog.Int("tags", len(g.points)))
			g.mu.Lock()
			g.pollSess, g.uaSess, g.subID = s.s, nil, 0
			for i := range g.items {
				g.items[i].polled, g.items[i].live, g.items[i].status = g.addrs[i] != nil, false, 0
			}
			g.mu.Unlock()
			return nil
		}
		if !isConnErr(err) {
			q, why := value.BadCommunicationError, err.Error()
			if code, ok := asStatus(err); ok {
				q, why = StatusQuality(uint32(code)), "subscription refused: "+statusReason(code)
			}
			for i := range g.items {
				if g.addrs[i] != nil {
					g.markItem(i, q, why, 0)
				}
			}
		}
		return fmt.Errorf("create subscription: %w", err)
	}
	g.mu.Lock()
	g.uaSess, g.subID, g.pollSess = s.s, res.SubscriptionID, nil
	g.interval = time.Duration(res.RevisedPublishingInterval * float64(time.Millisecond))
	if g.interval <= 0 {
		g.interval = iv
	}
	g.keepAlive = max(res.RevisedMaxKeepAliveCount, 1)
	g.lastSeen, g.lastSeq = time.Now(), 0
	var all []int
	for i := range g.items {
		g.items[i].live, g.items[i].monID, g.items[i].status, g.items[i].polled = false, 0, 0, false
		g.items[i].hasSeq, g.items[i].hasRead = false, false
		if g.addrs[i] != nil {
			all = append(all, i)
		}
	}
	g.mu.Unlock()
	s.d.log.Info("opcua: subscription created", slog.Uint64("subscription_id", uint64(res.SubscriptionID)),
		slog.Duration("publishing_interval", g.interval), slog.Uint64("keep_alive_count", uint64(g.keepAlive)),
		slog.Int("items", len(all)))
	s.signalSubs()
	return s.createItems(ctx, g, all)
}

// createItems creates the monitored items of points idx in g's
// subscription, and inspects each item's result (a bad item never fails
// the others: docs/opcua.md, fault C13 — gopcua v0.8.0's monitor package returns
// no items and the first bad status for the whole batch, so the driver
// sends CreateMonitoredItems itself).
func (s *session) createItems(ctx context.Context, g *group, idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	g.mu.Lock()
	subID := g.subID
	g.mu.Unlock()
	var reqs []*ua.MonitoredItemCreateRequest
	var which []int
	for _, i := range idx {
		nid, err := s.d.resolve(s, g.points[i].Tag, g.points[i].Address)
		if err != nil {
			q, why := device.QualityOf(err)
			g.markItem(i, q, why, uint32(ua.StatusBadNodeIDUnknown))
			g.mu.Lock()
			g.items[i].status = ua.StatusBadNodeIDUnknown
			g.mu.Unlock()
			continue
		}
		reqs = append(reqs, s.itemRequest(g, i, nid))
		which = append(which, i)
	}
	var retry []int
	for start := 0; start < len(reqs); start += maxNodesPerCall {
		end := min(start+maxNodesPerCall, len(reqs))
		req := &ua.CreateMonitoredItemsRequest{
			SubscriptionID:     subID,
			TimestampsToReturn: ua.TimestampsToReturnBoth,
			ItemsToCreate:      reqs[start:end],
		}
		res, err := send[*ua.CreateMonitoredItemsResponse](ctx, s, time.Duration(s.d.cfg.Timeout), req)
		if err != nil {
			if errors.Is(err, ua.StatusBadSubscriptionIDInvalid) {
				g.mu.Lock()
				g.subID = 0
				g.mu.Unlock()
			}
			return fmt.Errorf("create monitored items: %w", err)
		}
		if len(res.Results) != end-start {
			return fmt.Errorf("create monitored items: %d results for %d items", len(res.Results), end-start)
		}
		for k, r := range res.Results {
			i := which[start+k]
			code := r.StatusCode
			if StatusQuality(uint32(code)) == value.Good {
				g.mu.Lock()
				g.items[i].live, g.items[i].monID, g.items[i].status = true, r.MonitoredItemID, 0
				g.items[i].marked, g.items[i].markWhy = 0, ""
				g.mu.Unlock()
				continue
			}
			switch code & codeMask {
			case ua.StatusBadMonitoredItemFilterUnsupported, ua.StatusBadFilterNotAllowed,
				ua.StatusBadDeadbandFilterInvalid, ua.StatusBadMonitoredItemFilterInvalid:
				g.mu.Lock()
				first := !g.items[i].noFilter
				g.items[i].noFilter = true
				g.mu.Unlock()
				if first {
					s.d.log.Warn("opcua: the server refused the deadband; monitoring without it",
						slog.String("tag", g.points[i].Tag), slog.String("status", StatusName(uint32(code))))
					retry = append(retry, i)
					continue
				}
			}
			if pollItemStatus[code&codeMask] {
				g.mu.Lock()
				g.items[i].live, g.items[i].status, g.items[i].polled = false, 0, true
				g.mu.Unlock()
				s.d.log.Warn("opcua: the server cannot monitor a tag; polling it with Read",
					slog.String("tag", g.points[i].Tag), slog.String("status", StatusName(uint32(code))))
				continue
			}
			g.mu.Lock()
			g.items[i].live, g.items[i].status = false, code
			g.mu.Unlock()
			s.d.log.Warn("opcua: monitored item refused", slog.String("tag", g.points[i].Tag),
				slog.String("address", g.points[i].Address), slog.String("status", StatusName(uint32(code))))
			g.markItem(i, StatusQuality(uint32(code)), "monitored item refused: "+statusReason(code), uint32(code))
		}
	}
	if len(retry) > 0 {
		return s.createItems(ctx, g, retry)
	}
	return nil
}

func (s *session) itemRequest(g *group, i int, nid *ua.NodeID) *ua.MonitoredItemCreateRequest {
	g.mu.Lock()
	noFilter := g.items[i].noFilter
	g.mu.Unlock()
	var filter *ua.ExtensionObject
	if g.opts.Deadbands != nil && !noFilter {
		db := g.opts.Deadbands[i]
		switch {
		case db.Absolute > 0:
			filter = ua.NewExtensionObject(&ua.DataChangeFilter{Trigger: ua.DataChangeTriggerStatusValue,
				DeadbandType: uint32(ua.DeadbandTypeAbsolute), DeadbandValue: db.Absolute})
		case db.Percent > 0:
			filter = ua.NewExtensionObject(&ua.DataChangeFilter{Trigger: ua.DataChangeTriggerStatusValue,
				DeadbandType: uint32(ua.DeadbandTypePercent), DeadbandValue: db.Percent})
		}
	}
	return &ua.MonitoredItemCreateRequest{
		ItemToMonitor:  &ua.ReadValueID{NodeID: nid, AttributeID: ua.AttributeIDValue, DataEncoding: &ua.QualifiedName{}},
		MonitoringMode: ua.MonitoringModeReporting,
		RequestedParameters: &ua.MonitoringParameters{
			ClientHandle:     uint32(i + 1),
			SamplingInterval: float64(g.opts.SamplingInterval) / float64(time.Millisecond),
			Filter:           filter,
			QueueSize:        g.opts.QueueSize,
			DiscardOldest:    true,
		},
	}
}

// verifySub counts g's live monitored items on the server
// (Server.GetMonitoredItems, OPC UA Part 5 §9.1) against the configured
// ones: items missing on the server, and items whose node vanished
// (notified BadNodeIdUnknown/Invalid), are deleted and re-created; a
// subscription missing on the server is re-created whole; server items
// that are not ours are deleted (no orphan left behind).
func (s *session) verifySub(ctx context.Context, g *group) error {
	g.mu.Lock()
	subID := g.subID
	g.mu.Unlock()
	serverHandles, err := s.monitoredItems(ctx, subID)
	switch {
	case errors.Is(err, ua.StatusBadSubscriptionIDInvalid):
		s.d.log.Warn("opcua: subscription gone on the server; re-creating it", slog.Uint64("subscription_id", uint64(subID)))
		return s.createSub(ctx, g)
	case err != nil && isConnErr(err):
		return err
	case err != nil:
		// The server cannot count (no GetMonitoredItems): trust our own state.
		serverHandles = nil
	}
	onServer := map[uint32]bool{}
	for _, h := range serverHandles {
		onServer[h] = true
	}
	var retry []int
	var drop []uint32
	known := map[uint32]bool{}
	g.mu.Lock()
	for i := range g.items {
		it := &g.items[i]
		if g.addrs[i] == nil || it.polled {
			continue
		}
		if it.live {
			known[it.monID] = true
		}
		switch {
		case it.live && serverHandles != nil && !onServer[it.monID]:
			s.d.log.Warn("opcua: monitored item missing on the server; re-creating it", slog.String("tag", g.points[i].Tag))
			it.live = false
			retry = append(retry, i)
		case it.live && isNodeGone(it.status):
			drop = append(drop, it.monID)
			it.live = false
			retry = append(retry, i)
		case !it.live:
			retry = append(retry, i)
		}
	}
	g.mu.Unlock()
	for _, h := range serverHandles {
		if !known[h] {
			drop = append(drop, h)
		}
	}
	if len(drop) > 0 {
		if err := s.deleteItems(ctx, subID, drop); err != nil {
			return err
		}
	}
	return s.createItems(ctx, g, retry)
}

func isNodeGone(c ua.StatusCode) bool {
	switch c & codeMask {
	case ua.StatusBadNodeIDUnknown, ua.StatusBadNodeIDInvalid:
		return true
	}
	return false
}

// monitoredItems calls Server.GetMonitoredItems for a subscription and
// returns the server handles of its items.
func (s *session) monitoredItems(ctx context.Context, subID uint32) ([]uint32, error) {
	req := &ua.CallMethodRequest{
		ObjectID:       ua.NewNumericNodeID(0, id.Server),
		MethodID:       ua.NewNumericNodeID(0, id.Server_GetMonitoredItems),
		InputArguments: []*ua.Variant{ua.MustVariant(subID)},
	}
	res, err := guarded(ctx, time.Duration(s.d.cfg.Timeout), func(c context.Context) (*ua.CallMethodResult, error) {
		return s.c.Call(c, req)
	})
	if err != nil {
		return nil, err
	}
	if res.StatusCode != ua.StatusOK {
		return nil, res.StatusCode
	}
	if len(res.OutputArguments) != 2 {
		return nil, fmt.Errorf("GetMonitoredItems: %d output arguments", len(res.OutputArguments))
	}
	sh, _ := res.OutputArguments[0].Value().([]uint32)
	if sh == nil {
		sh = []uint32{}
	}
	return sh, nil
}

func (s *session) deleteItems(ctx context.Context, subID uint32, ids []uint32) error {
	_, err := send[*ua.DeleteMonitoredItemsResponse](ctx, s, time.Duration(s.d.cfg.Timeout),
		&ua.DeleteMonitoredItemsRequest{SubscriptionID: subID, MonitoredItemIDs: ids})
	if err != nil {
		return fmt.Errorf("delete monitored items: %w", err)
	}
	return nil
}

func (s *session) deleteSub(ctx context.Context, subID uint32) error {
	_, err := send[*ua.DeleteSubscriptionsResponse](ctx, s, time.Duration(s.d.cfg.Timeout),
		&ua.DeleteSubscriptionsRequest{SubscriptionIDs: []uint32{subID}})
	if err != nil && !errors.Is(err, ua.StatusBadSubscriptionIDInvalid) {
		return fmt.Errorf("delete subscription: %w", err)
	}
	return nil
}

// assign stores a response of the expected type (gopcua's safeAssign is
// not exported).
func assign[T ua.Response](v ua.Response, out *T) error {
	r, ok := v.(T)
	if !ok {
		return fmt.Errorf("unexpected response %T", v)
	}
	*out = r
	return nil
}

// poll reads, at their publishing interval, the tags the server cannot
// monitor (see pollSubStatus, pollItemStatus) and delivers each change of
// value or quality, as a monitored item with queue size 1 would.
func (s *session) poll(ctx context.Context) {
	t := time.NewTicker(min(max(time.Duration(s.d.cfg.PublishingInterval)/4, 20*time.Millisecond), 250*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		for _, g := range s.d.groupsSnapshot() {
			g.mu.Lock()
			due := !g.removed && now.Sub(g.lastPoll) >= g.opts.PublishingInterval
			var idx []int
			var pts []device.Point
			if due {
				for i := range g.items {
					owned := g.pollSess == s.s || (g.uaSess == s.s && g.subID != 0)
					if owned && g.items[i].polled {
						idx = append(idx, i)
						pts = append(pts, g.points[i])
					}
				}
				if len(idx) > 0 {
					g.lastPoll = now
				}
			}
			g.mu.Unlock()
			if len(idx) == 0 {
				continue
			}
			out := make([]value.VQT, len(pts))
			if err := s.d.readOnce(ctx, s, pts, out); err != nil {
				if isConnErr(err) {
					s.fail(err)
					return
				}
				continue
			}
			for k, i := range idx {
				v := out[k]
				g.mu.Lock()
				it := &g.items[i]
				changed := !it.hasRead || it.lastRead.Quality != v.Quality || it.lastRead.StatusCode != v.StatusCode || !value.Equal(it.lastRead.Value, v.Value)
				if changed {
					it.lastRead, it.hasRead = v, true
					it.marked, it.markWhy = 0, ""
				}
				g.mu.Unlock()
				if changed {
					g.deliver(i, v)
				}
			}
		}
	}
}
