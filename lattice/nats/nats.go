// Package nats is the lattice on NATS: the same [lattice.Bus] as the
// in-memory [lattice.Memory], shared by every process connected to one NATS
// server or cluster.
//
// [Connect] dials a server and returns a [*Bus] that owns the connection;
// [New] puts a Bus on a connection the host already has (and keeps). Either
// way the Bus goes into the Engine's options in place of the in-memory one,
// and every module then publishes and subscribes across the processes.
// [Options] names the subject prefix (processes with one prefix share one
// lattice) and this process's node name. Modules that need NATS beyond
// events (JetStream for webhooks, request/reply for the cluster's tasks)
// reach the connection through [Bus.Conn].
//
// [Options.Security] is how [Connect] authenticates (a creds file, an nkey
// seed, user and password, or a token) and protects the connection (TLS
// with a CA, a client certificate, a server name); a failure to connect
// says which of [ErrBadCredentials], [ErrTLSFailed] and [ErrUnreachable]
// it is.
//
// Events travel as their JSON wire form on core NATS subjects
// "<prefix>.<type>", so an exact-type filter is filtered by the server and
// other processes can tap the lattice with a plain `nats sub 'axocoatl.>'`;
// an event's class travels in the ClassHeader header.
// Delivery is at most once, as on the in-memory bus: each subscriber has a
// bounded buffer and counts what it misses ([lattice.Subscription.Missed]);
// no subscriber slows another. A subscription also has Drain(ctx) error
// (beside Close): it ends the subscription without dropping what the server
// already sent to it. A Bus hands the events it publishes to its own
// subscriptions itself, and drops their echo from the server (by the
// [NodeHeader] header): so a [lattice.Filter] with Local set, which
// receives only the events this Bus published, needs no NATS subscription,
// and no event another connection sends claiming this node reaches any
// of this Bus's subscriptions. Delivered events carry their node
// ([lattice.Event].Node).
//
// What a subscription's Missed counts on NATS, exactly:
//   - events dropped because its buffer was full (as on every Bus);
//   - for a subscription on the whole lattice (any filter but one exact
//     type), events of any other node that it never received (but the
//     observe-only ones it would take unsigned: [Options].ObserveOnly):
//     each Bus numbers its events (the [SeqHeader]), a failed publish
//     included, and a gap in a node's numbers (this process disconnected
//     while that node published, that node's publishes failing while it
//     was cut off with its reconnect buffer full) is counted when the
//     node's next event arrives, whatever the subscription's filter (the
//     type of a lost event is unknown). A node seen again with a lower number
//     restarted: that is no gap. At most [MaxTrackedNodes] nodes are followed
//     per subscription; beyond, tracking starts over;
//   - for every subscription, the events of its own Bus it matches whose
//     Publish failed (the connection closed, or lost with its reconnect
//     buffer full).
//
// Events lost in a gap that no later event of that node reveals (its last
// events before it stopped) are not counted.
//
// With [Options.Key] every event is signed (the [SigHeader] header: an
// AES-256-GCM tag under this Bus's subkey of the key, over subject, the node, class and sequence headers and the
// JSON) and every subscription drops what is unsigned, forged, signed
// with a key it does not hold ([Options.AcceptedKeys] besides), outside
// 30 s of this clock or seen by it before; [Bus.Collector] counts them
// by reason. A forged event does not count as missed. The one exception
// is the types [Options.ObserveOnly] names (events no daemon acts on,
// such as a run's start and its model calls): published unsigned, and
// taken unsigned by a Bus whose own list names them, marked
// [lattice.Event].Unverified, for observers that only show them.
package nats

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/axocoatl/axocoatl-go/internal/clustersig"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/secret"
)

// DefaultPrefix is the subject prefix when [Options.Prefix] is zero.
const DefaultPrefix = "axocoatl"

// Options configure a [Bus] made by [New] or [Connect]. The zero value is
// the default prefix and a random node name.
type Options struct {
	// Prefix of every subject. Zero: "axocoatl". Two lattices on one NATS
	// server stay apart by using different prefixes.
	Prefix string
	// Node names this process on the lattice; each published event carries
	// it in the NodeHeader header, by which this Bus drops the echo of its
	// own events (its subscriptions had them from Publish) and others know
	// where an event came from. Zero: a new random id. Two Buses must not
	// share one: each would drop the other's events.
	Node string
	// Security is the credentials and TLS [Connect] dials with. Zero: none
	// beyond what the URL carries. [New] takes the connection as it is.
	Security Security
	// Key is the cluster key (cluster.key): every event this Bus publishes
	// is signed with it (an AES-256-GCM tag, the SigHeader header) and every
	// event received must be signed with it or one of AcceptedKeys, within
	// 30 s of this clock and not seen before by the subscription; others
	// are dropped and counted ([Bus.Collector]). Zero: events are neither
	// signed nor checked, and anyone who may publish on the prefix can
	// act as a daemon. At least 16 bytes ([Options.Validate]).
	Key secret.Secret
	// AcceptedKeys are further keys events may be signed with: the old
	// key (or the next one) during a rolling change of Key. At most 8.
	// Zero: Key only.
	AcceptedKeys []secret.Secret
	// ObserveOnly are event types that no daemon acts on, only shows
	// (the Engine's run telemetry: axocoatl.ObserveOnlyEvents): with a
	// Key this Bus publishes them unsigned, and takes them unsigned from
	// other nodes, marked [lattice.Event].Unverified. It is the
	// receiver's own list that decides, never anything a message says: an
	// unsigned event of any other type is dropped and counted as without
	// a key. Exact types, at most [MaxObserveOnly]. Every daemon of a
	// cluster should name the same ones (one that does not drops the
	// others' unsigned events, counted). Zero: every event is signed.
	// Without a Key it changes nothing.
	ObserveOnly []string
	// Logger receives the refused events' log lines (one per 10 s). Zero:
	// none.
	Logger *slog.Logger
}

// Validate checks the keys (the connection's settings are
// [Security.Validate]'s); its errors name neither key.
func (o Options) Validate() error {
	ke, ae := clustersig.ValidateKeys(o.Key, o.AcceptedKeys)
	if ke != nil {
		return fmt.Errorf("cluster key %w", ke)
	}
	if ae != nil {
		return fmt.Errorf("accepted keys %w", ae)
	}
	if len(o.ObserveOnly) > MaxObserveOnly {
		return fmt.Errorf("observe-only event types: %d, more than %d", len(o.ObserveOnly), MaxObserveOnly)
	}
	for _, t := range o.ObserveOnly {
		if t == "" || len(t) > 128 || hasGlob([]string{t}) {
			return fmt.Errorf("observe-only event type %q: must be an exact event type", t)
		}
	}
	return nil
}

// MaxObserveOnly bounds [Options].ObserveOnly.
const MaxObserveOnly = 64

// SigHeader carries an event's signature when the Bus has a key
// ([Options.Key]).
const SigHeader = clustersig.Header

// NodeHeader is the NATS header that names the node an event came from.
const NodeHeader = "Axocoatl-Node"

// SeqHeader numbers a node's events, from 1 for each Bus, in publish
// order: a subscriber that sees a gap knows how many it missed. A Bus with
// a key numbers the events it publishes unsigned ([Options].ObserveOnly)
// apart from its signed ones, so that a forged unsigned event cannot
// disturb the count of the signed ones (and a daemon that takes no
// unsigned event sees no gap).
const SeqHeader = "Axocoatl-Seq"

// ClassHeader carries an event's class, which its JSON form does not: it
// is "telemetry" on a telemetry event and absent on any other, which a
// Filter then takes for coordination (as an event of a node that predates
// the header is taken).
const ClassHeader = "Axocoatl-Class"

// TraceParentHeader and TraceStateHeader carry an event's W3C trace
// context ([lattice.Event].TraceParent, TraceState), which its JSON form
// does not; absent when it has none. A value over
// [lattice.MaxTraceHeaderBytes] is dropped on receipt.
const (
	TraceParentHeader = "traceparent"
	TraceStateHeader  = "tracestate"
)

// MaxTrackedNodes bounds the nodes whose numbering one subscription
// follows (gap counting); beyond it the tracking is cleared.
const MaxTrackedNodes = 4096

// Bus is a [lattice.Bus] on a NATS connection ([New], [Connect]). It is
// safe for concurrent use.
type Bus struct {
	nc      *natsgo.Conn
	ownConn bool
	prefix  string
	node    string

	mu     sync.Mutex
	subs   map[*subscription]struct{}
	closed atomic.Bool
	// list is subs as Publish reads it, without b.mu: replaced (never
	// changed) under b.mu.
	list atomic.Pointer[[]*subscription]

	// pubMu orders numbering, sending and the own subscriptions'
	// deliveries, so that a node's numbers reach the server, and its
	// events its own subscribers, in order.
	pubMu  sync.Mutex
	seq    uint64
	useq   uint64 // the unsigned events' numbers (ObserveOnly, with a key)
	failed atomic.Uint64

	keys *clustersig.Keyring // nil: no key
	// observeOnly: Options.ObserveOnly, with a key only (nil without).
	observeOnly map[string]struct{}
}

var _ lattice.Bus = (*Bus)(nil)

// New returns a Bus on an existing connection, which Close leaves open.
// Keys [Options.Validate] refuses are an error; without keys it never
// fails.
func New(nc *natsgo.Conn, opts Options) (*Bus, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("lattice/nats: %w", err)
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	node := opts.Node
	if node == "" {
		node = lattice.NewID(time.Now())
	}
	keys, err := clustersig.New(opts.Key, opts.AcceptedKeys, opts.Logger)
	if err != nil {
		return nil, fmt.Errorf("lattice/nats: %w", err)
	}
	b := &Bus{nc: nc, prefix: prefix, node: node, subs: map[*subscription]struct{}{}, keys: keys}
	if keys != nil && len(opts.ObserveOnly) > 0 {
		b.observeOnly = make(map[string]struct{}, len(opts.ObserveOnly))
		for _, t := range opts.ObserveOnly {
			b.observeOnly[t] = struct{}{}
		}
	}
	return b, nil
}

var nullPayload = json.RawMessage("null")

// setListLocked publishes b.subs to Publish; b.mu held.
func (b *Bus) setListLocked() {
	l := make([]*subscription, 0, len(b.subs))
	for s := range b.subs {
		l = append(l, s)
	}
	b.list.Store(&l)
}

// Signed reports whether the Bus signs and checks events ([Options.Key]).
func (b *Bus) Signed() bool { return b.keys != nil }

// Keyring is the Bus's keys, for the modules of this repository that sign
// their own NATS messages with them (cluster, egress); nil without a key.
func (b *Bus) Keyring() *clustersig.Keyring { return b.keys }

// Collector is axocoatl_cluster_rejected_total{reason}: the NATS messages
// refused for want of a valid signature, by this Bus's subscriptions (each
// counts an event it received) and by the modules signing with its
// [Bus.Keyring]. All zero without a key.
func (b *Bus) Collector() prometheus.Collector { return clustersig.Collector(b.keys) }

// Node is the name of this process on the lattice ([Options.Node]).
func (b *Bus) Node() string { return b.node }

// Prefix is the subject prefix of this lattice ([Options.Prefix]).
func (b *Bus) Prefix() string { return b.prefix }

// Conn is the NATS connection, for modules that use NATS beyond the
// lattice (JetStream, request/reply). It is owned by the Bus.
func (b *Bus) Conn() *natsgo.Conn { return b.nc }

// Connect dials url with [Options.Security] and returns a [Bus] that owns
// the connection: [Bus.Close] closes it. natsOpts are passed to the NATS
// client as they are, after the security options. A failure to connect
// wraps [ErrBadCredentials], [ErrTLSFailed] or [ErrUnreachable] when it is
// one of those, and says what to check; no error contains a credential.
// Settings [Security.Validate] refuses are refused before dialing.
func Connect(url string, opts Options, natsOpts ...natsgo.Option) (*Bus, error) {
	if err := opts.Security.Validate(); err != nil {
		return nil, fmt.Errorf("lattice/nats: connect: %w", err)
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("lattice/nats: connect: %w", err)
	}
	sec, err := opts.Security.NATSOptions()
	if err != nil {
		return nil, fmt.Errorf("lattice/nats: connect: %w", err)
	}
	nc, err := natsgo.Connect(url, append(sec, natsOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("lattice/nats: connect: %w", explain(err, opts.Security))
	}
	b, err := New(nc, opts)
	if err != nil {
		nc.Close()
		return nil, err
	}
	b.ownConn = true
	return b, nil
}

// subject maps an event type to a subject token. Types made of
// [A-Za-z0-9_-] are used as they are; anything else (dots and wildcards
// would change the subject's meaning) is hex-encoded behind a "~".
func (b *Bus) subject(eventType string) string {
	for i := 0; i < len(eventType); i++ {
		c := eventType[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return b.prefix + ".~" + hex.EncodeToString([]byte(eventType))
		}
	}
	return b.prefix + "." + eventType
}

// Publish implements [lattice.Bus]. A failed publish is counted
// ([Bus.Failed]) and returned.
//
// This Bus's own subscriptions get the event from here, not back from the
// server (its echo is dropped on receipt): what a node published needs no
// signature checked by that node, and an event that only claims to be
// this node's (the NodeHeader is anyone's to write) reaches none of them.
func (b *Bus) Publish(_ context.Context, ev lattice.Event) error {
	if b.closed.Load() {
		return lattice.ErrClosed
	}
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("lattice/nats: %w", err)
	}
	// Validated: the payload is an object, so the encoding cannot fail.
	data := ev.AppendJSON(make([]byte, 0, 96+len(ev.ID)+len(ev.Type)+len(ev.ProducedBy)+len(ev.Payload)))
	msg := &natsgo.Msg{Subject: b.subject(ev.Type), Data: data, Header: make(natsgo.Header, 4)}
	msg.Header[NodeHeader] = []string{b.node}
	class := ""
	if ev.EffectiveClass() == lattice.ClassTelemetry {
		class = lattice.ClassTelemetry.String()
		msg.Header[ClassHeader] = []string{class}
	}
	if ev.TraceParent != "" {
		msg.Header[TraceParentHeader] = []string{ev.TraceParent}
		if ev.TraceState != "" {
			msg.Header[TraceStateHeader] = []string{ev.TraceState}
		}
	}
	_, unsigned := b.observeOnly[ev.Type]
	// As a subscriber of another node gets it.
	own := ev
	own.Node, own.Unverified, own.Class = b.node, false, lattice.ClassAny
	if class != "" {
		own.Class = lattice.ClassTelemetry
	}
	if len(own.Payload) == 0 {
		own.Payload = nullPayload // what its JSON form says
	}
	b.pubMu.Lock()
	// A failed publish keeps its number: the gap tells other nodes.
	var seq string
	if unsigned {
		b.useq++
		seq = strconv.FormatUint(b.useq, 10)
	} else {
		b.seq++
		seq = strconv.FormatUint(b.seq, 10)
	}
	msg.Header[SeqHeader] = []string{seq}
	if b.keys != nil && !unsigned {
		// What Keyring.Sign would read back off the header, given.
		msg.Header[SigHeader] = []string{b.keys.SignHeader(msg.Subject, &clustersig.Covered{b.node, class, seq}, data)}
	}
	err := b.nc.PublishMsg(msg)
	// Nobody gets a failed one, this node's subscribers included: they
	// count it (those of other nodes see the gap in the numbering).
	if l := b.list.Load(); l != nil {
		for _, s := range *l {
			if !s.filter.Match(own) {
				continue
			}
			if err != nil {
				s.missed.Add(1)
			} else {
				s.offer(own)
			}
		}
	}
	b.pubMu.Unlock()
	if err != nil {
		b.failed.Add(1)
		return fmt.Errorf("lattice/nats: publish %s: %w", ev.Type, err)
	}
	return nil
}

// Failed is how many publishes failed after the event was valid: the
// connection was closed, or lost with its reconnect buffer full. Each also
// counts as missed for this Bus's subscriptions that match it.
func (b *Bus) Failed() uint64 { return b.failed.Load() }

type subscription struct {
	bus    *Bus
	filter lattice.Filter
	ch     chan lattice.Event
	missed atomic.Uint64
	natsub *natsgo.Subscription
	// whole: subscribed to every subject of the lattice, so each node's
	// numbering is seen without holes but for losses.
	whole bool
	// last is each node's last number seen (of its signed events, with a
	// key); only deliver (one goroutine per NATS subscription) touches it.
	last map[string]uint64
	// guard: the signed events this subscription took (replays refused).
	guard *clustersig.Guard

	mu     sync.Mutex // orders deliveries against close(ch)
	closed bool
}

func (s *subscription) Events() <-chan lattice.Event { return s.ch }
func (s *subscription) Missed() uint64               { return s.missed.Load() }
func (s *subscription) Close() error {
	s.bus.remove(s)
	return s.close()
}

func (b *Bus) remove(s *subscription) {
	b.mu.Lock()
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		b.setListLocked()
	}
	b.mu.Unlock()
}

// Drain ends the subscription without losing what was already sent to
// it: the server stops sending, every event it had sent before (this
// Bus's own published earlier included) is handed to Events, and then
// Events is closed. It returns when Events is closed, or closes it at
// once when ctx ends first (what was still pending is then dropped). A
// module that must act on every event it received until it stops (egress
// queueing deliveries) drains instead of closing.
func (s *subscription) Drain(ctx context.Context) error {
	s.bus.remove(s)
	if s.natsub == nil {
		return s.close() // Local: everything it got is in Events already
	}
	// Registered before the drain starts: closed when it ends.
	st := s.natsub.StatusChanged(natsgo.SubscriptionClosed)
	var err error
	if e := s.natsub.Drain(); e != nil && !errors.Is(e, natsgo.ErrConnectionClosed) && !errors.Is(e, natsgo.ErrBadSubscription) {
		err = fmt.Errorf("lattice/nats: drain: %w", e)
	} else if e == nil {
		select {
		case <-st:
		case <-ctx.Done():
			err = fmt.Errorf("lattice/nats: drain: %w", ctx.Err())
		}
	}
	if e := s.close(); err == nil {
		err = e
	}
	return err
}

func (s *subscription) close() error {
	var err error
	if s.natsub == nil {
		// Local: no NATS subscription.
	} else if e := s.natsub.Unsubscribe(); e != nil && !errors.Is(e, natsgo.ErrConnectionClosed) && !errors.Is(e, natsgo.ErrBadSubscription) {
		err = e
	}
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
	s.mu.Unlock()
	return err
}

// deliver runs on the NATS client's dispatch goroutine; it never blocks.
func (s *subscription) deliver(m *natsgo.Msg) {
	var ev lattice.Event
	node := m.Header.Get(NodeHeader)
	if node == s.bus.node {
		return // this Bus's own, delivered by Publish; or one claiming to be
	}
	unverified := false
	if k := s.bus.keys; k != nil {
		if s.bus.observeOnly != nil && m.Header.Get(SigHeader) == "" {
			// Unsigned: taken only if its type, read from the event itself
			// and its subject agreeing, is one this Bus's own list says
			// nobody acts on; marked.
			if json.Unmarshal(m.Data, &ev) != nil {
				ev = lattice.Event{}
			}
			if _, ok := s.bus.observeOnly[ev.Type]; ok && m.Subject == s.bus.subject(ev.Type) {
				unverified = true
			}
		}
		if !unverified && !k.Check(m, s.guard, "lattice event") {
			return // unsigned, forged, stale or replayed: counted
		}
	}
	if s.whole && !unverified {
		// An unverified event's number could be anything a forger
		// likes: it counts no gap (and none is lost in the signed
		// numbering, which is apart).
		s.countGap(node, m.Header.Get(SeqHeader))
	}
	if !unverified {
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			return // not an event of ours
		}
	}
	ev.Node, ev.Unverified = node, unverified
	if m.Header.Get(ClassHeader) == lattice.ClassTelemetry.String() {
		ev.Class = lattice.ClassTelemetry
	}
	// A peer's trace context, bounded as every one from outside is (the
	// propagator that reads it parses it; this keeps an oversized one
	// from being carried on).
	if tp := m.Header.Get(TraceParentHeader); tp != "" && len(tp) <= lattice.MaxTraceHeaderBytes {
		ev.TraceParent = tp
		if ts := m.Header.Get(TraceStateHeader); len(ts) <= lattice.MaxTraceHeaderBytes {
			ev.TraceState = ts
		}
	}
	if !s.filter.Match(ev) {
		return // one a glob or class filter does not want
	}
	s.offer(ev)
}

// offer hands ev to Events, or counts it missed when the buffer is full;
// it never blocks.
func (s *subscription) offer(ev lattice.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	select {
	case s.ch <- ev:
	default:
		s.missed.Add(1)
	}
}

// countGap counts the events of node that were numbered before n but
// never arrived.
func (s *subscription) countGap(node, seq string) {
	n, err := strconv.ParseUint(seq, 10, 64)
	if node == "" || err != nil {
		return // not numbered: an event from elsewhere
	}
	if s.last == nil || len(s.last) >= MaxTrackedNodes {
		s.last = map[string]uint64{}
	}
	if last, ok := s.last[node]; ok && n > last+1 {
		s.missed.Add(n - last - 1)
	}
	s.last[node] = n
}

// Subscribe implements [lattice.Bus]. A filter of one exact type subscribes to
// that type's subject; any other takes the whole prefix and filters here.
func (b *Bus) Subscribe(filter lattice.Filter, buffer int) (lattice.Subscription, error) {
	if err := filter.Validate(); err != nil {
		return nil, err
	}
	if buffer <= 0 {
		buffer = lattice.DefaultBuffer
	}
	s := &subscription{bus: b, filter: filter, ch: make(chan lattice.Event, buffer)}
	if b.keys != nil && !filter.Local {
		s.guard = clustersig.NewGuard()
	}
	// One NATS subscription per Subscribe keeps events in publish order
	// (each NATS subscription has its own dispatcher).
	subject := b.prefix + ".>"
	if len(filter.Types) == 1 && !hasGlob(filter.Types) {
		subject = b.subject(filter.Types[0])
	}
	s.whole = subject == b.prefix+".>"
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return nil, lattice.ErrClosed
	}
	if filter.Local {
		// Only this Bus's own events, which Publish hands it: nothing to
		// take from the server.
		b.subs[s] = struct{}{}
		b.setListLocked()
		return s, nil
	}
	ns, err := b.nc.Subscribe(subject, s.deliver)
	if err != nil {
		close(s.ch)
		return nil, fmt.Errorf("lattice/nats: subscribe %s: %w", subject, err)
	}
	s.natsub = ns
	// The subscriber's own buffer bounds memory; deliver never blocks, so
	// NATS need not drop anything as a slow consumer.
	ns.SetPendingLimits(-1, -1)
	// The subscription exists on the server once Flush returns, so an event
	// published right after Subscribe is not lost.
	if err := b.nc.Flush(); err != nil {
		s.close()
		return nil, fmt.Errorf("lattice/nats: subscribe: %w", err)
	}
	b.subs[s] = struct{}{}
	b.setListLocked()
	return s, nil
}

func hasGlob(types []string) bool {
	for _, t := range types {
		for _, c := range t {
			if c == '*' || c == '?' || c == '[' || c == '\\' {
				return true
			}
		}
	}
	return false
}

// closeFlushTimeout bounds Close's wait for the server to confirm what was
// published.
const closeFlushTimeout = 2 * time.Second

// Close ends every subscription and refuses further publishes. It flushes
// what was published, and closes the connection if Connect made it.
func (b *Bus) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.mu.Lock()
	subs := b.subs
	b.subs = nil
	b.list.Store(nil)
	b.mu.Unlock()
	var errs []error
	// While NATS is away there is nothing to flush to: do not wait for it.
	if b.nc.IsConnected() {
		if err := b.nc.FlushTimeout(closeFlushTimeout); err != nil && !errors.Is(err, natsgo.ErrConnectionClosed) {
			errs = append(errs, err)
		}
	}
	for s := range subs {
		errs = append(errs, s.close())
	}
	if b.ownConn {
		b.nc.Close()
	}
	return errors.Join(errs...)
}
