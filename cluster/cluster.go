// Package cluster makes daemons that share a NATS lattice one runtime for
// their agents: every agent of every daemon can be run from any of them.
//
// A Module announces this Engine's agents on NATS (a heartbeat), listens to
// the other daemons' announcements and lists their agents in the Engine
// ([axocoatl.Engine.AddRemoteAgent], with [axocoatl.AgentInfo.Node] saying
// where each runs), and serves its own agents to the others. Every door
// (HTTP execute, A2A, MCP, a Go call) ends in [axocoatl.Engine.ExecuteRequest],
// which sends a remote agent's task over NATS; the answer comes back the
// same way.
//
// # In Go terms
//
// The module is a door (other daemons' tasks enter through it) with no
// HTTP of its own. [New] takes a [Config] (the daemon's `cluster:`
// section; its zero value takes the NATS connection, node name and
// subject prefix of the Engine's bus, which must then be the NATS bus of
// package lattice/nats) and returns a [*Module]; [axocoatl.Engine.Use]
// calls [Module.Start], [axocoatl.Engine.Close] calls [Module.Closing] and
// then [Module.Stop]. The Engine hooks it uses: [axocoatl.Engine.Agents]
// and [axocoatl.Engine.WatchAgents] to learn what to announce,
// [axocoatl.Engine.AddRemoteAgent] with an [axocoatl.RemoteRun] to list
// another daemon's agents, [axocoatl.Engine.ExecuteRequest] to run the
// tasks others send here, and [axocoatl.Engine.Resync] after an outage, so
// that modules replicating state over the lattice
// ([axocoatl.ReplicatingModule], such as approval's gate) exchange it
// again. [Module.Peers] and [Module.Connected] say what it sees now.
//
// # Guarantees
//
//   - Exactly one executor per task: a task is a NATS request on the
//     agent's subject, taken by one member of a queue group of the daemons
//     hosting that agent id. It is never retried by this package: a task
//     whose daemon is lost fails with [axocoatl.ErrUnavailable] (it may have
//     run there; at most once). The daemon running a task repeats that it
//     has it every heartbeat; a caller that hears nothing of it for
//     expire_after (its own, or that daemon's if longer) fails the task and
//     tells that daemon to stop it, whether or not it tracks that daemon.
//   - Cancellation and deadlines cross: the caller's ctx deadline travels as
//     a timeout, and a cancel (a client gone, tasks/cancel,
//     notifications/cancelled) is sent to the executing daemon, which stops
//     the run (its AgentFailed says canceled). A run whose calling daemon
//     leaves the cluster is cancelled too.
//   - Membership within seconds: a daemon that stops announces its
//     departure; one that dies is dropped when its heartbeat has not been
//     heard for [Config.ExpireAfter] (zero: 5s).
//   - Local wins: an agent id this Engine hosts is always run here.
//   - NATS down: remote runs fail at once with [axocoatl.ErrUnavailable]
//     (doors answer 503) instead of waiting; remote agents stay listed
//     (their daemons are unreachable, not known to be gone) and the module
//     resumes by itself when the connection comes back.
//
// # Subjects
//
// Cluster traffic lives under "<prefix>-cluster." — beside, not under, the
// lattice's "<prefix>." events, so a tap on the event stream sees events
// only: announce (heartbeats), exec.<agent id> (requests, queue group
// "exec"), cancel. Without a key, whoever may publish there may run
// agents: on a shared NATS, limit who may publish under the prefix.
//
// # Signatures
//
// With [Config].Key (or the key of the Engine's lattice/nats bus, whose
// Keyring the module then shares: [Module.Keyring]) every task, answer,
// event frame, cancel and announcement carries a signature (an AES-256-GCM
// tag under a subkey of the key: package doc of internal/clustersig)
// after its data, and what arrives unsigned, forged, signed with a key
// neither [Config].Key nor one of [Config].AcceptedKeys, outside 30 s of
// this clock or a second time is dropped, counted by reason and logged
// once per 10 s ([Module.Signed] says whether it signs). NATS's own "no
// responders" status cannot be signed and is taken as it is.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/internal/clustersig"
	"github.com/axocoatl/axocoatl-go/internal/lifecycle"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Defaults of the zero [Config] fields.
const (
	DefaultHeartbeatInterval = time.Second
	DefaultExpireAfter       = 5 * time.Second
	DefaultAcceptTimeout     = 5 * time.Second
	DefaultMaxConcurrentRuns = 64
	DefaultMaxAnnounceBytes  = 256 << 10
	DefaultMaxNodes          = 64
)

// Bounds a peer cannot change.
const (
	maxTaskID      = 128
	maxTombstones  = 1024        // cancels kept for tasks not yet seen
	maxPeerTTL     = time.Minute // a peer cannot ask to be kept longer
	maxPendingCall = 8           // replies queued for one call
)

// Config configures a [Module] made by [New]. The zero value is usable on
// an Engine whose bus ([axocoatl.Options].Bus) is a lattice/nats Bus; every field's comment says what zero means.
// Every daemon of a cluster should use the same heartbeat settings.
type Config struct {
	// HeartbeatInterval is how often this daemon announces its agents.
	// Zero: 1s.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// ExpireAfter is how long the others keep this daemon's agents listed
	// after its last heartbeat (it travels in each announcement, capped at
	// 1m). Zero: 5s. It must be at least twice HeartbeatInterval
	// ([Config.Validate] says so).
	ExpireAfter time.Duration `yaml:"expire_after"`
	// AcceptTimeout bounds the wait for a daemon to take a task (it
	// answers at once unless it is stuck); then the task fails with
	// [axocoatl.ErrUnavailable]. Zero: 5s.
	AcceptTimeout time.Duration `yaml:"accept_timeout"`
	// MaxConcurrentRuns bounds the tasks this daemon runs for others at
	// once; beyond it a task is refused (the caller gets
	// [axocoatl.ErrUnavailable], 503). Zero: 64.
	MaxConcurrentRuns int `yaml:"max_concurrent_runs"`
	// MaxAnnounceBytes bounds one announcement, sent and received: agents
	// that do not fit are not announced (logged), a larger one received is
	// dropped. Zero: 256 KiB.
	MaxAnnounceBytes int `yaml:"max_announce_bytes"`
	// MaxNodes bounds the other daemons tracked; announcements of more are
	// dropped (logged). Zero: 64.
	MaxNodes int `yaml:"max_nodes"`

	// Key is the cluster key (a secret; AXOCOATL_CLUSTER_KEY in the daemon):
	// every task, answer, cancel and announcement this daemon sends is
	// signed with it (an AES-256-GCM tag) and every one it receives must be
	// signed with it or one of AcceptedKeys, within 30 s of this clock and
	// not seen before; others are dropped, counted
	// (axocoatl_cluster_rejected_total) and logged once per 10 s. At least
	// 16 bytes. Zero: the Engine's bus's key (lattice/nats
	// Options.Key), and without one nothing is signed or checked: anyone
	// who may publish under the prefix can run agents.
	Key secret.Secret `yaml:"key"`
	// AcceptedKeys are further keys taken (not signed with): the old key
	// (or the next) while a rolling restart changes Key. At most 8. Zero:
	// Key only (or the bus's accepted keys when Key is zero).
	AcceptedKeys []secret.Secret `yaml:"accepted_keys"`

	// Conn, Node and Prefix are the NATS connection, this daemon's node
	// name and the lattice's subject prefix. Zero: those of the Engine's
	// bus, which must then be a lattice/nats Bus.
	Conn   *natsgo.Conn `yaml:"-"`
	Node   string       `yaml:"-"`
	Prefix string       `yaml:"-"`
	// Logger receives the module's logs. Zero: the Engine's logger.
	Logger *slog.Logger `yaml:"-"`
}

// Validate checks the config. Each of its errors is an
// [*axocoatl.ConfigError] naming the key.
func (c Config) Validate() error {
	if err := cfgerr.NotNegative(cfgerr.N("heartbeat_interval", c.HeartbeatInterval), cfgerr.N("expire_after", c.ExpireAfter),
		cfgerr.N("accept_timeout", c.AcceptTimeout), cfgerr.N("max_concurrent_runs", c.MaxConcurrentRuns),
		cfgerr.N("max_announce_bytes", c.MaxAnnounceBytes), cfgerr.N("max_nodes", c.MaxNodes)); err != nil {
		return err
	}
	ke, ae := clustersig.ValidateKeys(c.Key, c.AcceptedKeys)
	if ke != nil {
		return cfgerr.Errorf("key", "%v", ke)
	}
	if ae != nil {
		return cfgerr.Errorf("accepted_keys", "%v", ae)
	}
	d := c.withDefaults()
	if d.ExpireAfter < 2*d.HeartbeatInterval {
		return cfgerr.Errorf("expire_after", "(%s) must be at least twice heartbeat_interval (%s)", d.ExpireAfter, d.HeartbeatInterval)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.ExpireAfter == 0 {
		c.ExpireAfter = DefaultExpireAfter
	}
	if c.AcceptTimeout == 0 {
		c.AcceptTimeout = DefaultAcceptTimeout
	}
	if c.MaxConcurrentRuns == 0 {
		c.MaxConcurrentRuns = DefaultMaxConcurrentRuns
	}
	if c.MaxAnnounceBytes == 0 {
		c.MaxAnnounceBytes = DefaultMaxAnnounceBytes
	}
	if c.MaxNodes == 0 {
		c.MaxNodes = DefaultMaxNodes
	}
	return c
}

// natsBus is what the module needs of a lattice/nats Bus.
type natsBus interface {
	Conn() *natsgo.Conn
	Node() string
	Prefix() string
}

// keyedBus is a lattice/nats Bus's keys, shared when Config.Key is zero.
type keyedBus interface {
	Keyring() *clustersig.Keyring
}

// Module is the cluster membership and task routing of one Engine. Create
// it with [New] and start it with [axocoatl.Engine.Use];
// [axocoatl.Engine.Close] stops it (the others hear of the departure at
// once).
type Module struct {
	cfg    Config
	nc     *natsgo.Conn
	node   string
	subj   string // "<prefix>-cluster"
	inbox  string // this module's reply subjects: inbox + "." + token
	url    string // the NATS server, redacted, for errors
	eng    *axocoatl.Engine
	log    *slog.Logger
	sem    chan struct{}
	seq    atomic.Uint64
	kick   chan struct{} // an announcement is due now
	status chan natsgo.Status

	// ctx ends the loop and the workers; Stop cancels it. The runs served
	// here are not its children: Stop cancels each in running.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	life       lifecycle.State
	closing    bool // the Engine is closing: no new task from the others
	stopping   bool
	connected  bool
	subs       []*natsgo.Subscription
	served     map[string]*natsgo.Subscription // local agent id → its exec subscription
	peers      map[string]*peer
	registered map[string]*registration
	running    map[string]*served // task id → a run served here
	tombs      map[string]struct{}
	tombRing   []string
	calls      map[string]*call // token → a task this daemon sent
	tasks      chan *natsgo.Msg // this daemon's agents' tasks, for the workers
	workers    int              // workers running (see work)
	waiting    int              // workers waiting for a task
	localSig   string           // the local agents last announced
	stopWatch  func()
	dropped    uint64 // announcements dropped (bounds)
	instance   string // this Module's announcements, among daemons of one name
	twins      uint64 // announcements heard from another daemon of this name

	// keys sign what this module sends and check what it receives (nil:
	// no key); one guard per subscription, each of which sees a sender's
	// messages in order.
	keys                                              *clustersig.Keyring
	guardAnnounce, guardCancel, guardReply, guardExec *clustersig.Guard
}

type peer struct {
	agents []agentWire
	seen   time.Time
	ttl    time.Duration
}

type registration struct {
	sig    string // nodes and definition it was registered with
	remove func()
}

type served struct {
	from   string
	cancel context.CancelCauseFunc
}

type call struct {
	ch   chan *execReply // pointers: a call's buffer is 8 words, not 8 answers
	node string          // the daemon that took it, once accepted

	// observe is the caller's run fan-out (Request.OnEvent as the Engine
	// hands it to a RemoteRun), told the events of 'E' frames; nil: the
	// caller does not listen. Guarded by evMu with frames and over (the
	// call returned: no event after it).
	observe func(agent.RunEvent)
	evMu    sync.Mutex
	frames  uint64
	over    bool
}

// New returns a Module; pass it to [axocoatl.Engine.Use].
func New(cfg Config) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	cfg = cfg.withDefaults()
	m := &Module{
		cfg:        cfg,
		sem:        make(chan struct{}, cfg.MaxConcurrentRuns),
		kick:       make(chan struct{}, 1),
		served:     map[string]*natsgo.Subscription{},
		peers:      map[string]*peer{},
		registered: map[string]*registration{},
		running:    map[string]*served{},
		tombs:      map[string]struct{}{},
		calls:      map[string]*call{},
		tasks:      make(chan *natsgo.Msg, taskQueue),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.instance = lattice.NewID(time.Now())
	var err error
	if m.keys, err = clustersig.New(cfg.Key, cfg.AcceptedKeys, nil); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	m.guardAnnounce, m.guardCancel, m.guardReply, m.guardExec = clustersig.NewGuard(), clustersig.NewGuard(), clustersig.NewGuard(), clustersig.NewGuard()
	return m, nil
}

// publish sends a message, signed when the module has a key.
func (m *Module) publish(subject, reply string, data []byte) error {
	// Sealed (the signature after the data), not in a header: NATS
	// parses headers at a cost a task's round trip would feel.
	data = m.keys.Seal(subject, reply, data)
	if reply != "" {
		return m.nc.PublishRequest(subject, reply, data)
	}
	return m.nc.Publish(subject, data)
}

// maxPayload is what a message's data may take under NATS max_payload,
// room for the signature kept.
func (m *Module) maxPayload() int64 {
	if m.keys == nil {
		return m.nc.MaxPayload()
	}
	return m.nc.MaxPayload() - clustersig.Overhead
}

// Signed reports whether the module signs and checks its messages
// ([Config].Key, or its bus's key).
func (m *Module) Signed() bool { return m.keys != nil }

// Keyring is the module's keys (its bus's when [Config].Key is zero); nil
// without a key.
func (m *Module) Keyring() *clustersig.Keyring { return m.keys }

// Name implements [axocoatl.Module].
func (m *Module) Name() string { return "cluster" }

// Node is this daemon's name in the cluster ([Config].Node, or the
// Engine's bus's).
func (m *Module) Node() string { return m.node }

// Start implements [axocoatl.Module]: it serves the Engine's agents,
// subscribes to the others' announcements, announces itself and asks the
// others to announce at once, so their agents are listed within a round
// trip.
func (m *Module) Start(ctx context.Context, e *axocoatl.Engine) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.life.CheckStart("cluster", nil); err != nil {
		return err
	}
	m.nc, m.node = m.cfg.Conn, m.cfg.Node
	prefix := m.cfg.Prefix
	if b, ok := e.Bus().(natsBus); ok {
		if m.nc == nil {
			m.nc = b.Conn()
		}
		if m.node == "" {
			m.node = b.Node()
		}
		if prefix == "" {
			prefix = b.Prefix()
		}
	}
	switch {
	case m.nc == nil:
		return errors.New("cluster: no NATS connection: the Engine's bus is not lattice/nats and Config.Conn is nil")
	case !validNode(m.node): // what the others accept in an announcement
		return fmt.Errorf("cluster: node name %q must be 1-128 characters, none of space, tab, newline, '.', '*' or '>'", m.node)
	case prefix == "":
		prefix = "axocoatl"
	}
	m.eng = e
	m.log = m.cfg.Logger
	if m.log == nil {
		m.log = e.Logger()
	}
	m.log = m.log.With("module", "cluster", "node", m.node)
	if kb, ok := e.Bus().(keyedBus); ok && m.keys == nil && m.cfg.Key.IsZero() {
		m.keys = kb.Keyring() // its counts and its log, shared with the bus
	}
	if m.keys != nil {
		m.keys.SetLogger(m.log)
	}
	m.subj = prefix + "-cluster"
	m.url = m.nc.ConnectedUrlRedacted()
	m.inbox = m.nc.NewInbox()

	fail := func(err error) error {
		for _, s := range m.subs {
			_ = s.Unsubscribe()
		}
		for _, s := range m.served {
			_ = s.Unsubscribe()
		}
		m.subs, m.served = nil, map[string]*natsgo.Subscription{}
		return fmt.Errorf("cluster: %w", err)
	}
	for subject, h := range map[string]natsgo.MsgHandler{
		m.subj + ".announce": m.onAnnounce,
		m.subj + ".cancel":   m.onCancel,
		m.inbox + ".*":       m.onReply,
	} {
		// NATS's default pending limits (500,000 messages, 64 MiB per
		// subscription) bound what a flood can queue here; each handler
		// returns at once.
		s, err := m.nc.Subscribe(subject, h)
		if err != nil {
			return fail(err)
		}
		m.subs = append(m.subs, s)
	}
	m.localSig = ""
	if err := m.serveLocalLocked(); err != nil {
		return fail(err)
	}
	if err := m.nc.FlushTimeout(5 * time.Second); err != nil {
		return fail(fmt.Errorf("NATS at %s: %w", m.nc.ConnectedUrlRedacted(), err))
	}
	m.connected = m.nc.Status() == natsgo.CONNECTED
	m.status = m.nc.StatusChanged(natsgo.CONNECTED, natsgo.RECONNECTING, natsgo.DISCONNECTED, natsgo.CLOSED)
	m.life.MarkStarted()
	m.announceLocked(true, false)
	m.wg.Go(m.loop)
	m.spawnWorkerLocked()
	// The watch's calls run on its own goroutine and take m.mu then.
	m.stopWatch = e.WatchAgents(m.localAgentsChanged)
	return nil
}

var _ axocoatl.ClosingModule = (*Module)(nil)

// Closing implements [axocoatl.ClosingModule]: while the Engine waits for its
// runs in flight, this daemon takes no new task from the others (its
// Engine would refuse it), so that a task for an agent another daemon
// also hosts goes there. Its agents stay listed and the tasks it runs for
// others finish and are answered; [Module.Stop] then announces the
// departure.
func (m *Module) Closing() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.life.Running() || m.closing {
		return
	}
	m.closing = true
	for _, s := range m.served {
		// A task already on its way to this daemon is refused at once
		// (drained), not left to the caller's accept timeout.
		_ = s.Drain()
	}
	m.served = map[string]*natsgo.Subscription{}
}

// Stop implements [axocoatl.Module]: it stops serving, tells the others this
// daemon left, cancels the runs it still serves and takes the other
// daemons' agents out of the Engine.
func (m *Module) Stop(ctx context.Context) error {
	m.mu.Lock()
	m.stopping = true
	if !m.life.Stop() {
		m.mu.Unlock()
		return nil
	}
	stopWatch := m.stopWatch
	m.mu.Unlock()
	stopWatch() // outside m.mu: a call in progress takes it

	m.mu.Lock()
	for _, s := range m.served {
		_ = s.Unsubscribe()
	}
	m.served = map[string]*natsgo.Subscription{}
	m.announceLocked(false, true)
	for _, r := range m.registered {
		r.remove()
	}
	m.registered = map[string]*registration{}
	for _, c := range m.calls {
		send(c, execReply{lost: "this daemon is leaving the cluster"})
	}
	for _, r := range m.running {
		r.cancel(context.Canceled)
	}
	subs := m.subs
	m.subs = nil
	m.mu.Unlock()

	if m.nc.IsConnected() {
		_ = m.nc.FlushTimeout(time.Second) // the departure goes out now
	}
	for _, s := range subs {
		_ = s.Unsubscribe()
	}
	m.cancel() // the loop ends before its status channel closes
	m.nc.RemoveStatusListener(m.status)
	return lifecycle.Wait(ctx, "cluster", &m.wg)
}

// loop sends the heartbeat, expires silent daemons and follows the
// connection's state.
func (m *Module) loop() {
	tick := time.NewTicker(m.cfg.HeartbeatInterval)
	defer tick.Stop()
	var last time.Time
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.status:
			m.checkConn()
		case <-m.kick:
			// Several hellos at once get one answer per quarter interval.
			if wait := m.cfg.HeartbeatInterval/4 - time.Since(last); wait > 0 {
				continue // the next tick announces
			}
			m.mu.Lock()
			m.announceLocked(false, false)
			m.mu.Unlock()
			last = time.Now()
		case <-tick.C:
			m.checkConn()
			m.mu.Lock()
			m.expireLocked(time.Now())
			m.announceLocked(false, false)
			m.mu.Unlock()
			last = time.Now()
		}
	}
}

// checkConn follows the NATS connection: lost, every task waiting on
// another daemon fails at once; back, the others' silence during the
// outage is forgiven and everyone is asked to announce.
func (m *Module) checkConn() {
	up := m.nc.Status() == natsgo.CONNECTED
	m.mu.Lock()
	defer m.mu.Unlock()
	if up == m.connected || m.stopping {
		return
	}
	m.connected = up
	if !up {
		m.log.Warn("NATS connection lost: tasks for other daemons' agents fail with 503 until it is back", "url", m.url)
		for _, c := range m.calls {
			send(c, execReply{lost: "the NATS connection was lost while the task ran elsewhere (it may have completed there)"})
		}
		return
	}
	m.log.Info("NATS connection back: announcing", "peers", len(m.peers))
	now := time.Now()
	for _, p := range m.peers {
		p.seen = now
	}
	m.announceLocked(true, false)
	// What was published during the outage was not heard, here or there
	// (approvals raised on either side): the modules that replicate state
	// over the lattice exchange it again. Through the Engine: the cluster
	// knows none of them.
	m.eng.Resync(context.Background())
}

// Connected reports whether the module can reach the cluster now.
func (m *Module) Connected() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.connectedLocked()
}

func (m *Module) connectedLocked() bool {
	return m.connected && m.nc.Status() == natsgo.CONNECTED
}

// Peers lists the other daemons' node names now listed, sorted.
func (m *Module) Peers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.peers))
	for n := range m.peers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// errorKind names an Engine error for the wire, so that the caller's
// errors.Is checks (timeouts 504, provider 502, …) work across daemons.
func errorKind(err error) string {
	switch {
	// A conversation's errors first: a door maps them (404, 409, 400)
	// whichever daemon ran the turn.
	case errors.Is(err, conversation.ErrBusy):
		return kindConvBusy
	case errors.Is(err, conversation.ErrNotFound):
		return kindConvNotFound
	case errors.Is(err, conversation.ErrOtherAgent):
		return kindConvOtherAgent
	case errors.Is(err, conversation.ErrFull):
		return kindConvFull
	case errors.Is(err, conversation.ErrInvalidID):
		return kindConvInvalidID
	case errors.Is(err, axocoatl.ErrUnavailable):
		return kindUnavailable
	case errors.Is(err, axocoatl.ErrTaskExists):
		return kindTaskExists
	case errors.Is(err, axocoatl.ErrBusy):
		// The executing Engine is at its MaxRuns: the caller's door
		// answers 503 (retry later), not a failure of the agent.
		return kindBusy
	case errors.Is(err, axocoatl.ErrClosed):
		return kindClosed
	case errors.Is(err, axocoatl.ErrAgentNotFound):
		return kindNotFound
	case errors.Is(err, context.DeadlineExceeded):
		return kindTimeout
	case errors.Is(err, context.Canceled):
		return kindCanceled
	case errors.Is(err, provider.ErrProvider):
		return kindProvider
	}
	return kindFailed
}

const (
	kindFailed      = "failed"
	kindTimeout     = "timeout"
	kindCanceled    = "canceled"
	kindProvider    = "provider"
	kindNotFound    = "not_found"
	kindClosed      = "closed"
	kindBusy        = "busy"
	kindUnavailable = "unavailable"
	// kindTaskExists: a task of that id runs on the executing daemon
	// (a daemon before it reads it as a failure).
	kindTaskExists = "task_exists"

	kindConvBusy       = "conversation_busy"
	kindConvNotFound   = "conversation_not_found"
	kindConvOtherAgent = "conversation_other_agent"
	kindConvFull       = "conversation_full"
	kindConvInvalidID  = "conversation_invalid_id"
)

// remoteError is an error of a run on another daemon, checkable as the
// executing Engine's error was.
type remoteError struct {
	kind, msg string
}

func (e *remoteError) Error() string { return e.msg }

func (e *remoteError) Is(target error) bool {
	switch e.kind {
	case kindTimeout:
		return target == context.DeadlineExceeded
	case kindCanceled:
		return target == context.Canceled
	case kindProvider:
		return target == provider.ErrProvider
	case kindTaskExists:
		return target == axocoatl.ErrTaskExists
	case kindConvBusy:
		return target == conversation.ErrBusy
	case kindConvNotFound:
		return target == conversation.ErrNotFound
	case kindConvOtherAgent:
		return target == conversation.ErrOtherAgent
	case kindConvFull:
		return target == conversation.ErrFull
	case kindConvInvalidID:
		return target == conversation.ErrInvalidID
	case kindNotFound, kindClosed, kindBusy, kindUnavailable:
		// The listing was stale or the daemon is going or full: try
		// again later, here or there.
		return target == axocoatl.ErrUnavailable
	}
	return false
}

// unavailable wraps axocoatl.ErrUnavailable with the reason.
func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", axocoatl.ErrUnavailable, fmt.Sprintf(format, args...))
}

// validSubjectToken reports whether s can be one token of a subject.
func validSubjectToken(s string) bool {
	return s != "" && agent.ValidID(s)
}

func itoa(n uint64) string { return strconv.FormatUint(n, 36) }
