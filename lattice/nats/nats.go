// Package nats is the lattice on NATS: the same Bus as the in-memory one,
// shared by every process connected to one NATS server or cluster.
//
// Events travel as their JSON wire form on core NATS subjects
// "<prefix>.<type>", so an exact-type filter is filtered by the server and
// other processes can tap the lattice with a plain `nats sub 'axocoatl.>'`.
// Delivery is at most once, as on the in-memory bus: each subscriber has a
// bounded buffer and counts what it misses; no subscriber slows another.
package nats

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/axocoatl/axocoatl-go/lattice"
)

// DefaultPrefix is the subject prefix when Options.Prefix is zero.
const DefaultPrefix = "axocoatl"

// Options configure a Bus.
type Options struct {
	// Prefix of every subject. Zero: "axocoatl". Two lattices on one NATS
	// server stay apart by using different prefixes.
	Prefix string
	// Node names this process on the lattice; each published event carries
	// it in the NodeHeader header, which is how a Local subscription knows
	// its own events. Zero: a new random id. Two Buses must not share one.
	Node string
}

// NodeHeader is the NATS header that names the node an event came from.
const NodeHeader = "Axocoatl-Node"

// Bus is a lattice.Bus on a NATS connection.
type Bus struct {
	nc      *natsgo.Conn
	ownConn bool
	prefix  string
	node    string

	mu     sync.Mutex
	subs   map[*subscription]struct{}
	closed atomic.Bool
}

var _ lattice.Bus = (*Bus)(nil)

// New returns a Bus on an existing connection, which Close leaves open.
func New(nc *natsgo.Conn, opts Options) *Bus {
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	node := opts.Node
	if node == "" {
		node = lattice.NewID(time.Now())
	}
	return &Bus{nc: nc, prefix: prefix, node: node, subs: map[*subscription]struct{}{}}
}

// Node is the name of this process on the lattice (Options.Node).
func (b *Bus) Node() string { return b.node }

// Prefix is the subject prefix of this lattice (Options.Prefix).
func (b *Bus) Prefix() string { return b.prefix }

// Conn is the NATS connection, for modules that use NATS beyond the
// lattice (JetStream, request/reply). It is owned by the Bus.
func (b *Bus) Conn() *natsgo.Conn { return b.nc }

// Connect dials url and returns a Bus that owns the connection.
func Connect(url string, opts Options, natsOpts ...natsgo.Option) (*Bus, error) {
	nc, err := natsgo.Connect(url, natsOpts...)
	if err != nil {
		return nil, fmt.Errorf("lattice/nats: connect: %w", err)
	}
	b := New(nc, opts)
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

// Publish implements lattice.Bus.
func (b *Bus) Publish(_ context.Context, ev lattice.Event) error {
	if b.closed.Load() {
		return lattice.ErrClosed
	}
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("lattice/nats: %w", err)
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("lattice/nats: encode %s: %w", ev.Type, err)
	}
	msg := &natsgo.Msg{Subject: b.subject(ev.Type), Data: data, Header: natsgo.Header{NodeHeader: []string{b.node}}}
	if err := b.nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("lattice/nats: publish %s: %w", ev.Type, err)
	}
	return nil
}

type subscription struct {
	bus    *Bus
	filter lattice.Filter
	ch     chan lattice.Event
	missed atomic.Uint64
	natsub *natsgo.Subscription

	mu     sync.Mutex // orders deliveries against close(ch)
	closed bool
}

func (s *subscription) Events() <-chan lattice.Event { return s.ch }
func (s *subscription) Missed() uint64               { return s.missed.Load() }
func (s *subscription) Close() error {
	s.bus.mu.Lock()
	delete(s.bus.subs, s)
	s.bus.mu.Unlock()
	return s.close()
}

func (s *subscription) close() error {
	var err error
	if e := s.natsub.Unsubscribe(); e != nil && !errors.Is(e, natsgo.ErrConnectionClosed) && !errors.Is(e, natsgo.ErrBadSubscription) {
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
	if s.filter.Local && m.Header.Get(NodeHeader) != s.bus.node {
		return // another node's event
	}
	if err := json.Unmarshal(m.Data, &ev); err != nil || !s.filter.Match(ev.Type) {
		return // not an event of ours, or one a glob filter does not want
	}
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

// Subscribe implements lattice.Bus. A filter of one exact type subscribes to
// that type's subject; any other takes the whole prefix and filters here.
func (b *Bus) Subscribe(filter lattice.Filter, buffer int) (lattice.Subscription, error) {
	if err := filter.Validate(); err != nil {
		return nil, err
	}
	if buffer <= 0 {
		buffer = lattice.DefaultBuffer
	}
	s := &subscription{bus: b, filter: filter, ch: make(chan lattice.Event, buffer)}
	// One NATS subscription per Subscribe keeps events in publish order
	// (each NATS subscription has its own dispatcher).
	subject := b.prefix + ".>"
	if len(filter.Types) == 1 && !hasGlob(filter.Types) {
		subject = b.subject(filter.Types[0])
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return nil, lattice.ErrClosed
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

// Close ends every subscription and refuses further publishes. It flushes
// what was published, and closes the connection if Connect made it.
func (b *Bus) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.mu.Lock()
	subs := b.subs
	b.subs = nil
	b.mu.Unlock()
	var errs []error
	if !b.nc.IsClosed() {
		if err := b.nc.Flush(); err != nil {
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
