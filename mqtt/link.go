package mqtt

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/tagpath"
)

// Link is the supervisor link: the connection loop, the command queue and
// its workers, the outbox forwarder and the publishers. Build it with New,
// run it with Start, end it with Stop.
type Link struct {
	opts  Options
	cfg   Config
	base  string
	keys  keyring
	tls   *tls.Config
	pass  string
	log   *slog.Logger
	start time.Time

	cmds chan inbound // commands waiting for a worker
	busy chan inbound // commands to answer busy

	mu       sync.Mutex
	client   paho.Client // the current connection's client; nil while down
	wire     *wire       // the current connection's network connection; nil while down
	state    LinkState
	filters  map[int]*topicSub // flow subscriptions by id
	nextSub  int
	lastLive time.Time

	pubSeq   atomic.Uint64 // sequence number of published tag messages
	q0       q0State       // QoS 0 values written but not yet confirmed (qos0.go)
	counters struct {
		accepted, refused, busyDropped atomic.Uint64
	}

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// LinkState is the link now, for health and `qubiqctl status`: whether it
// is connected and to which broker since when, the last connection error
// and when, the outbox's counts, whether signatures are required, and the
// commands accepted and refused since start.
type LinkState struct {
	Connected     bool
	Broker        string
	Since         time.Time
	LastError     string
	LastErrorAt   time.Time
	Outbox        OutboxStats
	RequireSigned bool
	Accepted      uint64
	Refused       uint64
}

// inbound is one command message received.
type inbound struct {
	topic   string // below the base
	payload []byte
	at      time.Time
}

// CheckApplianceID returns nil when id can be the appliance's id on the
// link, and otherwise an error naming the fault: it is the client id and
// one level of every topic (qubiq/v1/<appliance_id>/…, BaseTopic), so it
// is not empty and holds no '/', '+', '#' (MQTT 3.1.1 §4.7) and no
// character tagpath.CheckTopicText refuses. New and qubiqd --check-config
// apply it.
func CheckApplianceID(id string) error {
	if id == "" {
		return errors.New("mqtt: appliance_id is empty")
	}
	if strings.ContainsAny(id, tagpath.TopicRefused) {
		return fmt.Errorf("mqtt: appliance_id %q is one level of every topic (qubiq/v1/<appliance_id>/…): it cannot hold '/', '+', '#' or NUL", id)
	}
	if err := tagpath.CheckTopicText(id); err != nil {
		return fmt.Errorf("mqtt: appliance_id %q is one level of every topic: %w", id, err)
	}
	return nil
}

// New builds the link from opts; nothing connects until Start. It refuses
// a config whose keys, grants, TLS files or password file do not load.
func New(opts Options) (*Link, error) {
	cfg := opts.Config
	cfg.applyDefaults()
	if err := CheckApplianceID(opts.ApplianceID); err != nil {
		return nil, err
	}
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("mqtt: no brokers")
	}
	for _, b := range cfg.Brokers {
		if err := checkBroker(b); err != nil {
			return nil, err
		}
	}
	if opts.Gateway == nil || opts.Outbox == nil || opts.Seen == nil {
		return nil, errors.New("mqtt: Gateway, Outbox and Seen are required")
	}
	kr, err := cfg.keyring()
	if err != nil {
		return nil, err
	}
	tc, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	pass, err := cfg.password()
	if err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Queue <= 0 {
		opts.Queue = DefaultQueue
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.BackoffMin <= 0 {
		opts.BackoffMin = DefaultBackoffMin
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = DefaultBackoffMax
	}
	l := &Link{opts: opts, cfg: cfg, base: BaseTopic(opts.ApplianceID), keys: kr, tls: tc, pass: pass,
		log: opts.Log, start: time.Now(), cmds: make(chan inbound, opts.Queue), busy: make(chan inbound, 1024),
		filters: map[int]*topicSub{}}
	l.q0.queuedAt, l.q0.max, l.q0.wait, l.q0.spacing = map[string]uint64{}, maxUnconfirmed, writeTimeout, pingSpacing
	l.state.RequireSigned = cfg.RequireSigned
	return l, nil
}

// Start runs the link until Stop: the connection loop, the command
// workers and the publishers. (Without require_signed the daemon puts a
// warning in health, which logs it at start-up: RequireSignedWarning.)
func (l *Link) Start(ctx context.Context) error {
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.spawn(func() { l.connectLoop(ctx) })
	for range l.opts.Workers {
		l.spawn(func() { l.worker(ctx) })
	}
	l.spawn(func() { l.busyReplier(ctx) })
	if l.opts.Publish != nil {
		l.spawn(func() { l.publishTags(ctx) })
	}
	if l.opts.Alarms != nil {
		l.spawn(func() { l.publishAlarms(ctx) })
	}
	l.spawn(func() { l.expireLoop(ctx) })
	return nil
}

func (l *Link) spawn(fn func()) {
	l.wg.Add(1)
	go func() { defer l.wg.Done(); fn() }()
}

// Stop publishes the offline status (retained) when connected, ends the
// connection and waits for the link's goroutines, within ctx.
func (l *Link) Stop(ctx context.Context) error {
	if l.cancel == nil {
		return nil
	}
	l.cancel()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mqtt: stop: %w", ctx.Err())
	}
}

// RequireSignedWarning is the health warning of a link whose commands
// are not verified (mqtt.require_signed: false).
const RequireSignedWarning = "mqtt.require_signed is false: supervisor commands are not verified; every command's audit record says so"

// State returns the link's state now.
func (l *Link) State() LinkState {
	l.mu.Lock()
	st := l.state
	l.mu.Unlock()
	st.Outbox = l.opts.Outbox.Stats()
	st.Accepted = l.counters.accepted.Load()
	st.Refused = l.counters.refused.Load()
	return st
}

// Base is the appliance's base topic.
func (l *Link) Base() string { return l.base }

// The connection's timeouts: the TCP (and TLS) connection with the MQTT
// handshake, and every write system call.
const (
	connectTimeout = 10 * time.Second
	writeTimeout   = 10 * time.Second
)

// connectLoop keeps one connection up: it tries the brokers in order, one
// paho client per attempt (auto-reconnect off, so no token outlives its
// connection), and after every broker of the list failed waits a capped
// exponential backoff with jitter before the next pass. A lost connection
// is tried again on the same broker first, at once, when it had been up
// for stableConnection; one lost sooner counts as a failed attempt on its
// broker: the next broker is tried, and after a pass the backoff grows (a
// broker that accepts the connection and closes it, for a client id
// another client takes over or a packet it refuses, would otherwise hold
// the link, reconnected to as fast as it drops it).
func (l *Link) connectLoop(ctx context.Context) {
	idx, failedPasses, failedInPass := 0, 0, 0
	for ctx.Err() == nil {
		broker := l.cfg.Brokers[idx%len(l.cfg.Brokers)]
		lost := make(chan error, 1)
		var w atomic.Pointer[wire]
		c := paho.NewClient(l.clientOptions(broker, lost).
			SetCustomOpenConnectionFn(dialer(l.tls, connectTimeout, writeTimeout, w.Store)))
		tok := c.Connect()
		var err error
		select {
		case <-tok.Done():
			err = tok.Error()
		case <-ctx.Done():
			c.Disconnect(0)
			return
		}
		if err == nil {
			up := time.Now()
			l.runConnection(ctx, c, w.Load(), broker, lost)
			if time.Since(up) >= stableConnection {
				failedPasses, failedInPass = 0, 0
				continue // the same broker first
			}
			// Lost at once: a failed attempt on this broker, as below.
		} else {
			l.setError(broker, err)
			l.log.Warn("mqtt connect failed", slog.String("broker", broker), slog.Any("err", err))
		}
		idx++
		failedInPass++
		if failedInPass >= len(l.cfg.Brokers) {
			failedInPass = 0
			if !sleep(ctx, backoff(failedPasses, l.opts.BackoffMin, l.opts.BackoffMax)) {
				return
			}
			failedPasses++
		}
	}
}

// stableConnection is how long a connection must have been up for its loss
// to be reconnected at once, and the backoff to start again from
// BackoffMin.
const stableConnection = 10 * time.Second

// runConnection serves one established connection until it is lost or ctx
// ends: the forwarder drains the outbox over it.
func (l *Link) runConnection(ctx context.Context, c paho.Client, w *wire, broker string, lost chan error) {
	l.mu.Lock()
	l.client, l.wire = c, w
	l.state.Connected, l.state.Broker, l.state.Since = true, broker, time.Now().UTC()
	l.mu.Unlock()
	l.log.Info("mqtt connected", slog.String("broker", broker))
	gen, cancel := context.WithCancel(ctx)
	fwdDone := make(chan struct{})
	go func() { defer close(fwdDone); l.forward(gen, c) }()
	var why error
	select {
	case why = <-lost:
	case <-ctx.Done():
	}
	cancel()
	<-fwdDone
	if why == nil {
		// Stopping: the QoS 0 path is held from here, so nothing is
		// written to the connection after the offline status (qos0.go).
		l.q0.mu.Lock()
		defer l.q0.mu.Unlock()
	}
	l.mu.Lock()
	l.client, l.wire = nil, nil
	l.state.Connected = false
	l.mu.Unlock()
	if why != nil {
		l.setError(broker, why)
		l.log.Warn("mqtt connection lost", slog.String("broker", broker), slog.Any("err", why))
		c.Disconnect(0) // the wire is closed (by paho on a loss, or here): a QoS 0 write waiting for room in it fails
		l.q0.mu.Lock()
		l.requeueQoS0(ctx)
		l.q0.mu.Unlock()
		return
	}
	// Stopping: say offline (retained) before the clean disconnect, which
	// suppresses the will. Its PUBACK also says the broker read every QoS
	// 0 value written before it; without one they are queued for the next
	// start.
	t := c.Publish(l.base+"/status", 1, true, l.statusPayload("offline"))
	if t.WaitTimeout(2*time.Second) && t.Error() == nil {
		l.dropKept()
	} else {
		l.requeueQoS0(ctx)
	}
	c.Disconnect(250)
}

// requeueQoS0 queues the QoS 0 values written to the connection that
// ended and not confirmed by the broker (q0.mu held).
func (l *Link) requeueQoS0(ctx context.Context) {
	if err := l.requeueKept(ctx); err != nil {
		l.log.Error("mqtt tag values not queued", slog.Any("err", err))
	}
}

func (l *Link) setError(broker string, err error) {
	l.mu.Lock()
	l.state.LastError = broker + ": " + err.Error()
	l.state.LastErrorAt = time.Now().UTC()
	l.mu.Unlock()
}

// clientOptions: the appliance id as client id, a persistent session
// (clean session off, so the broker keeps the command subscription and
// queues QoS 1 commands while the appliance is away), auto-reconnect off
// (connectLoop reconnects, with its own backoff and failover), the
// keep-alive, the retained last will on status, and the command
// subscription re-made in the on-connect handler every time (paho does
// not resubscribe by itself:
// https://github.com/eclipse-paho/paho.mqtt.golang/issues/238).
func (l *Link) clientOptions(broker string, lost chan error) *paho.ClientOptions {
	o := paho.NewClientOptions().AddBroker(broker).SetClientID(l.opts.ApplianceID).
		SetCleanSession(false).SetAutoReconnect(false).SetConnectRetry(false).
		SetKeepAlive(l.cfg.Keepalive).SetPingTimeout(max(l.cfg.Keepalive/2, time.Second)).
		SetConnectTimeout(connectTimeout).SetWriteTimeout(writeTimeout).
		SetOrderMatters(false).SetResumeSubs(false).
		SetBinaryWill(l.base+"/status", l.statusPayload("offline"), 1, true).
		SetDefaultPublishHandler(l.onMessage).
		SetConnectionLostHandler(func(_ paho.Client, err error) {
			select {
			case lost <- err:
			default:
			}
		}).
		SetOnConnectHandler(l.onConnect(lost))
	if l.cfg.Username != "" {
		o.SetUsername(l.cfg.Username)
	}
	if l.pass != "" {
		o.SetPassword(l.pass)
	}
	if l.tls != nil {
		o.SetTLSConfig(l.tls)
	}
	return o
}

// onConnect subscribes cmd/# (QoS 1) and the flows' filters, then
// publishes the birth status (retained). A subscription that fails drops
// the connection, so the loop tries again.
func (l *Link) onConnect(lost chan error) paho.OnConnectHandler {
	return func(c paho.Client) {
		filters := map[string]byte{l.base + "/cmd/#": 1}
		l.mu.Lock()
		for _, s := range l.filters {
			filters[l.base+"/"+s.filter] = 1
		}
		l.mu.Unlock()
		tok := c.SubscribeMultiple(filters, nil)
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			err := tok.Error()
			if err == nil {
				err = errors.New("subscribe timed out")
			}
			select {
			case lost <- fmt.Errorf("subscribe: %w", err):
			default:
			}
			return
		}
		c.Publish(l.base+"/status", 1, true, l.statusPayload("online"))
	}
}

// onMessage routes a received message: commands to the queue (answered
// busy when it is full, so a slow command never blocks the client's
// keep-alive), everything else to the flows' subscriptions.
func (l *Link) onMessage(_ paho.Client, m paho.Message) {
	rest, ok := strings.CutPrefix(m.Topic(), l.base+"/")
	if !ok {
		return
	}
	l.onMessageIn(inbound{topic: rest, payload: append([]byte(nil), m.Payload()...), at: time.Now()})
}

// onMessageIn routes one received message (its topic below the base).
func (l *Link) onMessageIn(in inbound) {
	rest := in.topic
	if strings.HasPrefix(rest, "cmd/") {
		select {
		case l.cmds <- in:
		default:
			select {
			case l.busy <- in:
			default:
				l.counters.busyDropped.Add(1)
				l.log.Error("mqtt command dropped: the command and busy queues are full", slog.String("topic", rest))
			}
		}
		return
	}
	l.deliverTopic(in)
}

// statusPayload is the status message: state, version, uptime, health.
func (l *Link) statusPayload(state string) []byte {
	health := "unknown"
	if state == "online" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		health = l.opts.Gateway.Health(ctx).Status
		cancel()
	}
	b, _ := json.Marshal(map[string]any{"state": state, "version": l.opts.Version,
		"uptime_s": int64(time.Since(l.start).Seconds()), "health": health})
	return b
}

// backoff is the wait after the n-th failed pass over the brokers: min
// doubling up to max, with jitter (a random 50 to 100 % of it), so a fleet
// does not reconnect in step.
func backoff(n int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 0; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// current returns the connected client and its wire, nil while down.
func (l *Link) current() (paho.Client, *wire) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.client, l.wire
}

// MQTTHealth is the link's state for health (gateway.MQTTHealthSource).
func (l *Link) MQTTHealth() gateway.MQTTHealth {
	st := l.State()
	return gateway.MQTTHealth{Connected: st.Connected, Broker: st.Broker, Since: st.Since, LastError: st.LastError,
		LastErrorAt: st.LastErrorAt, OutboxDepth: st.Outbox.Depth, OutboxBytes: st.Outbox.Bytes,
		OutboxOldest: st.Outbox.Oldest, OutboxDropped: st.Outbox.Dropped, RequireSigned: st.RequireSigned,
		Accepted: st.Accepted, Refused: st.Refused}
}
