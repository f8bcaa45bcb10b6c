package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/internal/clustersig"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// Defaults of [JetStream] where a field is zero.
const (
	DefaultJetStreamPrefix = "axocoatl"
	DefaultAckWait         = 30 * time.Second
	// DefaultMaxMsgSize bounds one queued delivery (its body): NATS's own
	// default max_payload. A bigger body is not queued (dropped, counted).
	DefaultMaxMsgSize = 1 << 20
)

// JetStream makes deliveries durable in NATS JetStream, shared by every
// process on one NATS lattice, instead of the bbolt file of
// [Config].DataDir. Each process queues the deliveries of its own events
// only (a Local lattice subscription); every process pulls from one durable
// consumer per webhook, so each delivery is sent by one process, and one
// in flight on a process that dies is sent by another after AckWait
// (at-least-once, with its delivery_id). Dead letters are kept in a second
// stream that any process lists and retries.
//
// A delivery is durable once queued, a few milliseconds after its event
// was published; a process killed in between loses the deliveries of the
// events it had not queued yet (as with the bbolt store before its write).
//
// Every process must configure the same webhooks (a name is the same URL
// and secret everywhere): a delivery is sent by whichever process takes it.
//
// Bounds: a webhook's queue holds at most the largest QueueSize of the
// webhooks (one per-subject limit per stream), for the whole cluster; a
// delivery beyond it, or bigger than MaxMsgSize, is dropped and counted.
// Dead letters: at most the sum of [Webhook].MaxDeadLetters, oldest
// discarded first.
// Each process pulls only as many deliveries as it has free senders
// (Concurrency); the server hands out at most 16×Concurrency per webhook
// unacknowledged across the cluster. A delivery's MaxAttempts count starts
// again on the process that takes it over.
type JetStream struct {
	// Conn is the NATS connection (the lattice's). Required; the module
	// does not close it. Never encoded: its options hold credentials.
	Conn *nats.Conn `json:"-" yaml:"-"`
	// Prefix is the lattice's subject prefix, from which the names below
	// derive. Zero: "axocoatl".
	Prefix string
	// Stream is the work-queue stream of pending deliveries, created if
	// missing (its dead letters are in Stream+"_DEAD"). Zero: the prefix in
	// upper case with "_EGRESS" ("AXOCOATL_EGRESS").
	Stream string
	// Consumer names the durable pull consumers: one per webhook,
	// Consumer+"_"+<webhook>, shared by every process. Zero: the prefix
	// with "_egress" ("axocoatl_egress").
	Consumer string
	// AckWait is how long a delivery may go without news from the process
	// sending it before another process takes it over. A live process
	// renews it (an "in progress" ack) every AckWait/3 while it retries.
	// Zero: 30s.
	AckWait time.Duration
	// MaxMsgSize bounds one queued delivery in bytes. Zero: 1 MiB (NATS's
	// default max_payload; a server's smaller limit wins).
	MaxMsgSize int
	// Keys are the cluster's keys (the lattice/nats Bus's Keyring, set
	// with cluster.key): every queued delivery and dead letter is signed,
	// and one whose signature does not check (queued by someone without
	// the key) is removed unsent, or not retried, and counted. Zero: none.
	Keys *clustersig.Keyring `json:"-" yaml:"-"`
}

// withDefaults fills the zero fields; subjects are "<root>.queue.<webhook>"
// and "<root>.dead.<webhook>.<delivery_id>" with root = prefix+"_egress",
// outside the lattice's "<prefix>.>".
func (j JetStream) withDefaults() JetStream {
	if j.Prefix == "" {
		j.Prefix = DefaultJetStreamPrefix
	}
	token := strings.ReplaceAll(j.Prefix, ".", "_")
	if j.Stream == "" {
		j.Stream = strings.ToUpper(token) + "_EGRESS"
	}
	if j.Consumer == "" {
		j.Consumer = token + "_egress"
	}
	if j.AckWait == 0 {
		j.AckWait = DefaultAckWait
	}
	if j.MaxMsgSize == 0 {
		j.MaxMsgSize = DefaultMaxMsgSize
	}
	return j
}

// ValidJetStreamName reports whether s may name a stream or consumer
// ([JetStream].Stream, [JetStream].Consumer):
// 1-200 characters, none of space, '.', '*', '>', '/', '\' or controls.
func ValidJetStreamName(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c == 0x7f || strings.ContainsRune(".*>/\\", c) {
			return false
		}
	}
	return true
}

// Validate checks the names and bounds (the connection is checked by
// [Module.Start]).
func (j JetStream) Validate() error {
	bad := cfgerr.Errorf
	switch {
	case j.Stream != "" && !ValidJetStreamName(j.Stream):
		return bad("stream", "%q: want 1-200 characters without spaces, '.', '*', '>', '/' or '\\'", j.Stream)
	case j.Consumer != "" && !ValidJetStreamName(j.Consumer):
		return bad("consumer", "%q: want 1-200 characters without spaces, '.', '*', '>', '/' or '\\'", j.Consumer)
	case j.AckWait < 0:
		return bad("ack_wait", "must not be negative")
	case j.AckWait > 0 && j.AckWait < time.Second:
		return bad("ack_wait", "must be at least 1s")
	case j.MaxMsgSize < 0:
		return bad("max_msg_size", "must not be negative")
	case j.MaxMsgSize > math.MaxInt32:
		// The stream's limit is an int32: more would wrap (negative: none).
		return bad("max_msg_size", "%d is over %d bytes", j.MaxMsgSize, math.MaxInt32)
	}
	return nil
}

// Headers of a queued delivery (its body is the message's data).
const (
	hdrDelivery  = "Axocoatl-Delivery"
	hdrEventID   = "Axocoatl-Event-Id"
	hdrEventType = "Axocoatl-Event-Type"
	hdrCreated   = "Axocoatl-Created" // unix nanoseconds
	hdrNode      = "Axocoatl-Node"    // the connection's name: who queued it
)

// jsBackend is the backend on a NATS lattice: each webhook's deliveries wait
// in a JetStream work queue shared by every process ([JetStream]).
type jsBackend struct {
	cfg   JetStream
	js    jetstream.JetStream
	queue jetstream.Stream
	dead  jetstream.Stream
	root  string
}

// jsCallTimeout bounds one JetStream API call (info, get, publish ack).
const jsCallTimeout = 5 * time.Second

// stateTimeout bounds reading a webhook's cluster state (a status request
// or a metrics scrape waits for it).
const stateTimeout = time.Second

// ErrClusterUnavailable is returned (HTTP 503) by what needs the cluster's
// JetStream state while NATS is away or does not answer.
var ErrClusterUnavailable = errors.New("egress: cluster unavailable")

// unavailable wraps an error of a JetStream call as ErrClusterUnavailable.
func unavailable(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrClusterUnavailable, what, err)
}

// enqueueRetryFor is how long the queueing of a batch is retried (NATS
// away, a publish not acknowledged) before its deliveries are dropped and
// counted. The ingest goroutine waits meanwhile; the lattice subscription's
// buffer (SubscribeBuffer) absorbs what arrives, beyond it events are
// counted as missed.
const enqueueRetryFor = 30 * time.Second

func (b *jsBackend) queueSubject(webhook string) string { return b.root + ".queue." + webhook }
func (b *jsBackend) deadSubject(webhook, id string) string {
	return b.root + ".dead." + webhook + "." + id
}
func (b *jsBackend) consumerName(webhook string) string { return b.cfg.Consumer + "_" + webhook }

// openJetStream creates (or updates) the two streams and one consumer per
// webhook.
func openJetStream(ctx context.Context, cfg JetStream, hooks []*hook) (*jsBackend, error) {
	if cfg.Conn == nil {
		return nil, errors.New("egress: jetstream: no NATS connection")
	}
	cfg = cfg.withDefaults()
	js, err := jetstream.New(cfg.Conn, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return nil, fmt.Errorf("egress: jetstream: %w", err)
	}
	b := &jsBackend{cfg: cfg, js: js, root: strings.ReplaceAll(cfg.Prefix, ".", "_") + "_egress"}
	ctx, cancel := context.WithTimeout(ctx, 2*jsCallTimeout)
	defer cancel()
	maxQueue, maxDead := 0, 0
	for _, h := range hooks {
		maxQueue = max(maxQueue, h.cfg.QueueSize)
		maxDead += h.cfg.MaxDeadLetters
	}
	b.queue, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "axocoatl webhook deliveries waiting to be sent",
		Subjects:    []string{b.root + ".queue.>"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		// One subject per webhook: its queue is bounded on the server, so
		// that the bound holds for the whole cluster. The limit is one per
		// stream: the largest queue_size of the webhooks.
		MaxMsgsPerSubject:    int64(maxQueue),
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: true,
		MaxMsgSize:           int32(cfg.MaxMsgSize),
		Duplicates:           2 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("egress: jetstream stream %s: %w%s", cfg.Stream, err, jsHint(err))
	}
	b.dead, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              cfg.Stream + "_DEAD",
		Description:       "axocoatl webhook deliveries that failed, kept for retry",
		Subjects:          []string{b.root + ".dead.>"},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		MaxMsgsPerSubject: 1,
		MaxMsgs:           int64(maxDead),
		Discard:           jetstream.DiscardOld,
	})
	if err != nil {
		return nil, fmt.Errorf("egress: jetstream stream %s_DEAD: %w", cfg.Stream, err)
	}
	for _, h := range hooks {
		c, err := b.queue.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:       b.consumerName(h.cfg.Name),
			Description:   "axocoatl webhook " + h.cfg.Name + ", shared by every daemon",
			FilterSubject: b.queueSubject(h.cfg.Name),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       cfg.AckWait,
			MaxDeliver:    -1, // the webhook's MaxAttempts ends a delivery, not redeliveries
			MaxAckPending: 16 * h.cfg.Concurrency,
		})
		if err != nil {
			return nil, fmt.Errorf("egress: jetstream consumer %s: %w", b.consumerName(h.cfg.Name), err)
		}
		h.cons = c
	}
	return b, nil
}

// jsHint says what to check when the server has no JetStream.
func jsHint(err error) string {
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return " (webhooks on a NATS lattice need JetStream: start nats-server with -js)"
	}
	return ""
}

// errEnqueueDropped marks deliveries that can never be queued (too big,
// the webhook's queue full).
var errEnqueueDropped = errors.New("not queued")

// queueMsg is the message that queues d.
func (b *jsBackend) queueMsg(webhook string, d *delivery, msgID string) *nats.Msg {
	m := nats.NewMsg(b.queueSubject(webhook))
	m.Data = d.body
	m.Header.Set(jetstream.MsgIDHeader, msgID)
	m.Header.Set(hdrDelivery, d.id)
	m.Header.Set(hdrEventID, d.eventID)
	m.Header.Set(hdrEventType, d.eventType)
	m.Header.Set(hdrCreated, strconv.FormatInt(d.created.UnixNano(), 10))
	if d.traceParent != "" {
		m.Header.Set(hdrTraceParent, d.traceParent)
		if d.traceState != "" {
			m.Header.Set(hdrTraceState, d.traceState)
		}
	}
	if name := b.cfg.Conn.Opts.Name; name != "" {
		m.Header.Set(hdrNode, name)
	}
	b.cfg.Keys.Sign(m)
	return m
}

// fullOrTooBig tells the publish errors that retrying cannot cure.
func fullOrTooBig(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) {
		return true
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return strings.Contains(api.Description, "maximum messages per subject") ||
			strings.Contains(api.Description, "message size exceeds") || api.Code == 413
	}
	return strings.Contains(err.Error(), "maximum messages per subject")
}

// enqueue publishes ds to the webhook's queue and waits for the server's
// acknowledgements, retrying what failed for up to enqueueRetryFor (a
// repeated publish is deduplicated by its Nats-Msg-Id, the delivery_id). It
// returns the deliveries not queued.
func (b *jsBackend) enqueue(ctx context.Context, h *hook, ds []*delivery) (dropped int, lastErr error) {
	deadline := time.Now().Add(enqueueRetryFor)
	for len(ds) > 0 {
		// While NATS is away a publish would only fill the connection's
		// reconnect buffer, which the lattice's own events need.
		for !b.cfg.Conn.IsConnected() {
			if time.Now().After(deadline) {
				return dropped + len(ds), fmt.Errorf("NATS %s", b.cfg.Conn.Status())
			}
			select {
			case <-ctx.Done():
				return dropped + len(ds), ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
		}
		type pending struct {
			d  *delivery
			f  jetstream.PubAckFuture
			er error
		}
		ps := make([]pending, len(ds))
		for i, d := range ds {
			f, err := b.js.PublishMsgAsync(b.queueMsg(h.cfg.Name, d, d.id))
			ps[i] = pending{d: d, f: f, er: err}
		}
		timer := time.NewTimer(jsCallTimeout)
		var retry []*delivery
		for _, p := range ps {
			err := p.er
			if err == nil {
				select {
				case <-p.f.Ok():
				case err = <-p.f.Err():
				case <-timer.C:
					err = context.DeadlineExceeded
					timer.Reset(0) // the rest are due too: do not wait again
				case <-ctx.Done():
					timer.Stop()
					return dropped + len(ds), ctx.Err()
				}
			}
			switch {
			case err == nil:
			case fullOrTooBig(err):
				dropped++
				lastErr = fmt.Errorf("%w: %w", errEnqueueDropped, err)
			default:
				retry = append(retry, p.d)
				lastErr = err
			}
		}
		timer.Stop()
		ds = retry
		if len(ds) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return dropped + len(ds), lastErr
		}
		select {
		case <-ctx.Done():
			return dropped + len(ds), ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return dropped, lastErr
}

// take implements backend: the events become deliveries queued in the
// shared stream.
func (b *jsBackend) take(ctx context.Context, h *hook, evs []lattice.Event, now time.Time) {
	var ds []*delivery
	for _, ev := range evs {
		d, err := newDelivery(ev, now)
		if err != nil {
			h.m.log.Error("webhook: event cannot be serialized; skipped", "webhook", h.cfg.Name, "event_id", ev.ID, "error", err)
			continue
		}
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		return
	}
	dropped, err := b.enqueue(ctx, h, ds)
	h.mu.Lock()
	h.counts.enqueued += uint64(len(ds) - dropped)
	h.mu.Unlock()
	if dropped > 0 { // a stop cut short included: these are lost
		h.mu.Lock()
		h.counts.dropped += uint64(dropped)
		h.mu.Unlock()
		h.series.dropped.Add(float64(dropped))
		h.m.log.Warn("webhook deliveries not queued in JetStream: dropped", "webhook", h.cfg.Name,
			"dropped", dropped, "error", err)
	}
}

// fetchWait is how long one pull request waits for messages when the
// queue is empty; new messages reach a waiting request at once.
const fetchWait = 5 * time.Second

// pull takes deliveries from the webhook's shared consumer, never more than
// it has free senders for, and hands them to its Concurrency senders.
func (b *jsBackend) pull(ctx context.Context, h *hook) {
	conc := h.cfg.Concurrency
	free := make(chan struct{}, conc)
	jobs := make(chan jetstream.Msg)
	for range conc {
		free <- struct{}{}
		h.m.wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case msg := <-jobs:
					b.deliver(ctx, h, msg)
					free <- struct{}{}
				}
			}
		})
	}
	var errLoggedAt time.Time
	for {
		if !b.cfg.Conn.IsConnected() { // nothing to pull from until it returns
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-free:
		}
		n := 1
	more:
		for n < conc {
			select {
			case <-free:
				n++
			default:
				break more
			}
		}
		fctx, cancel := context.WithTimeout(ctx, fetchWait)
		batch, err := h.cons.Fetch(n, jetstream.FetchContext(fctx))
		got := 0
		if err == nil {
			for msg := range batch.Messages() {
				select {
				case jobs <- msg:
					got++
				case <-ctx.Done():
					_ = msg.Nak() // another process takes it at once
				}
			}
			err = batch.Error()
		}
		cancel()
		for range n - got {
			free <- struct{}{}
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) &&
			!errors.Is(err, jetstream.ErrNoMessages) {
			if time.Since(errLoggedAt) > 10*time.Second {
				errLoggedAt = time.Now()
				h.m.log.Warn("webhook: pulling deliveries from JetStream failed; retrying", "webhook", h.cfg.Name, "error", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// deliveryOf reads a queued message back into a delivery.
func deliveryOf(msg jetstream.Msg) (*delivery, error) {
	hd := msg.Headers()
	d := &delivery{id: hd.Get(hdrDelivery), eventID: hd.Get(hdrEventID), eventType: hd.Get(hdrEventType),
		body: msg.Data(), status: StatusQueued}
	if d.id == "" || len(d.body) == 0 {
		return nil, errors.New("not a queued delivery (no delivery id or body)")
	}
	if ns, err := strconv.ParseInt(hd.Get(hdrCreated), 10, 64); err == nil {
		d.created = time.Unix(0, ns).UTC()
	}
	// Queued by any process of the cluster: bounded like a peer's.
	d.traceOf(lattice.Event{TraceParent: hd.Get(hdrTraceParent), TraceState: hd.Get(hdrTraceState)})
	return d, nil
}

// deliver sends one queued delivery and settles its message: acked when
// delivered or dead-lettered, left to another process (Nak) when stopping.
func (b *jsBackend) deliver(ctx context.Context, h *hook, msg jetstream.Msg) {
	if !b.cfg.Keys.CheckStored(msg.Subject(), msg.Headers(), msg.Data(), "queued webhook delivery") {
		_ = msg.Term() // counted and logged: never sent
		return
	}
	d, err := deliveryOf(msg)
	if err != nil {
		h.m.log.Error("webhook: unreadable message in the JetStream queue; removed", "webhook", h.cfg.Name, "error", err)
		_ = msg.Term()
		return
	}
	var seq uint64
	if md, err := msg.Metadata(); err == nil {
		seq = md.Sequence.Stream
	}
	d.seq = seq
	h.mu.Lock()
	// A message redelivered to the process that still holds it (its
	// renewals came late: a stall) stays with that sender, which settles
	// it; one redelivered after this process delivered it (the ack came
	// late) is acked, not sent again. Only the same message, by its stream
	// sequence: another message under the same delivery_id is sent.
	if prev := h.live[d.id]; prev != nil && seq != 0 && prev.seq == seq {
		h.mu.Unlock()
		h.m.log.Warn("webhook: a delivery came back while this process sends it (its lease lapsed); left to that sender",
			"webhook", h.cfg.Name, "delivery_id", d.id)
		return
	}
	for _, r := range h.recent {
		if r.id == d.id && seq != 0 && r.seq == seq && r.status == StatusDelivered {
			h.mu.Unlock()
			h.m.log.Warn("webhook: a delivery came back after this process delivered it (its ack came late); acknowledged again, not sent",
				"webhook", h.cfg.Name, "delivery_id", d.id)
			_ = msg.Ack()
			return
		}
	}
	d.status = StatusInFlight
	h.live[d.id] = d
	h.inFlight++
	h.mu.Unlock()
	// While the delivery retries, its message is kept: "in progress" resets
	// AckWait on the server. A timer, not a goroutine, waits between
	// renewals.
	every := b.cfg.AckWait / 3
	var hb *time.Timer
	var hbMu sync.Mutex
	stopped := false
	hbMu.Lock()
	hb = time.AfterFunc(every, func() {
		_ = msg.InProgress()
		hbMu.Lock()
		if !stopped {
			hb.Reset(every)
		}
		hbMu.Unlock()
	})
	hbMu.Unlock()
	out := h.send(ctx, d)
	hbMu.Lock()
	stopped = true
	hb.Stop()
	hbMu.Unlock()

	h.mu.Lock()
	h.inFlight--
	delete(h.live, d.id)
	if ctx.Err() != nil {
		d.status = StatusQueued
		h.mu.Unlock()
		_ = msg.Nak()
		return
	}
	if out == outcomeDelivered {
		d.status, d.lastError = StatusDelivered, ""
		h.counts.delivered++
		h.remember(d)
		h.mu.Unlock()
		h.series.delivered.Inc()
		if err := msg.Ack(); err != nil {
			h.m.log.Warn("webhook: acknowledging a delivery failed; it may be sent again with its delivery_id",
				"webhook", h.cfg.Name, "delivery_id", d.id, "error", err)
		}
		return
	}
	if out == outcomeFailed {
		d.status = StatusFailed
		h.counts.failed++
	} else {
		d.status = StatusDeadLettered
		h.counts.deadLettered++
	}
	rec := d.record()
	status, lastErr, attempts := d.status, d.lastError, len(d.attempts)-d.base
	h.mu.Unlock()
	if status == StatusFailed {
		h.series.failed.Inc()
	} else {
		h.series.deadLettered.Inc()
	}
	h.m.log.Warn("webhook delivery failed", "webhook", h.cfg.Name, "delivery_id", d.id, "event_type", d.eventType,
		"status", status, "attempts", attempts, "error", lastErr)
	// The dead letter is stored before the queued message goes: a crash in
	// between leaves both, never neither.
	if err := b.putDead(ctx, h.cfg.Name, rec); err != nil {
		h.m.log.Error("webhook: dead letter not stored in JetStream; the delivery stays queued and is tried again",
			"webhook", h.cfg.Name, "delivery_id", d.id, "error", err)
		_ = msg.NakWithDelay(h.cfg.BackoffMax)
		return
	}
	_ = msg.Ack()
}

func (b *jsBackend) putDead(ctx context.Context, webhook string, rec record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), jsCallTimeout)
	defer cancel()
	m := nats.NewMsg(b.deadSubject(webhook, rec.ID))
	m.Data = data
	b.cfg.Keys.Sign(m)
	_, err = b.js.PublishMsg(ctx, m)
	return err
}

// shared implements backend: the consumer's and the dead letters' state
// on the server.
func (b *jsBackend) shared(h *hook) (clusterState, bool) {
	return b.clusterState(h), true
}

func (b *jsBackend) clusterState(h *hook) clusterState {
	var s clusterState
	if !b.cfg.Conn.IsConnected() {
		s.err = fmt.Errorf("%w: NATS %s", ErrClusterUnavailable, b.cfg.Conn.Status())
		return s
	}
	// Short: a scrape or a status request waits for it.
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	ci, err := h.cons.Info(ctx)
	if err != nil {
		s.err = err
		return s
	}
	s.queued, s.inFlight = int(ci.NumPending), ci.NumAckPending
	si, err := b.dead.Info(ctx, jetstream.WithSubjectFilter(b.root+".dead."+h.cfg.Name+".>"))
	if err != nil {
		s.err = err
		return s
	}
	s.dead = len(si.State.Subjects)
	return s
}

// scan reads up to limit messages of stream on subject (wildcards allowed),
// oldest first, one direct get each.
func scan(ctx context.Context, s jetstream.Stream, subject string, limit int, fn func(*jetstream.RawStreamMsg)) error {
	var seq uint64 = 1
	for range limit {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		fn(m)
		seq = m.Sequence + 1
	}
	return nil
}

// stored implements backend: the webhook's dead letters and its
// deliveries queued or in flight anywhere, as the streams hold them (those
// of the queue at most limit, oldest first).
func (b *jsBackend) stored(h *hook, limit int) ([]*delivery, error) {
	if !b.cfg.Conn.IsConnected() {
		return nil, fmt.Errorf("%w: NATS %s", ErrClusterUnavailable, b.cfg.Conn.Status())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*jsCallTimeout)
	defer cancel()
	var out []*delivery
	err := scan(ctx, b.dead, b.root+".dead."+h.cfg.Name+".*", h.cfg.MaxDeadLetters, func(m *jetstream.RawStreamMsg) {
		var r record
		if b.cfg.Keys.CheckStored(m.Subject, m.Header, m.Data, "webhook dead letter") && json.Unmarshal(m.Data, &r) == nil && r.ID != "" {
			out = append(out, r.delivery(m.Sequence))
		}
	})
	if err != nil {
		return nil, unavailable("reading dead letters", err)
	}
	// A message the consumer has handed out and that is still in the work
	// queue is in flight on some process (or waiting to be handed out
	// again).
	ci, err := h.cons.Info(ctx)
	if err != nil {
		return nil, unavailable("reading the consumer", err)
	}
	err = scan(ctx, b.queue, b.queueSubject(h.cfg.Name), limit, func(m *jetstream.RawStreamMsg) {
		d := &delivery{id: m.Header.Get(hdrDelivery), eventID: m.Header.Get(hdrEventID),
			eventType: m.Header.Get(hdrEventType), status: StatusQueued}
		if m.Sequence <= ci.Delivered.Stream {
			d.status = StatusInFlight
		}
		if ns, err := strconv.ParseInt(m.Header.Get(hdrCreated), 10, 64); err == nil {
			d.created = time.Unix(0, ns).UTC()
		}
		if d.id != "" && b.cfg.Keys.CheckStored(m.Subject, m.Header, m.Data, "queued webhook delivery") {
			out = append(out, d)
		}
	})
	if err != nil {
		return nil, unavailable("reading the queue", err)
	}
	return out, nil
}

// retry implements backend: a dead letter goes back to the queue, with its
// delivery_id and body, from any process.
func (b *jsBackend) retry(h *hook, id string) (Delivery, error) {
	ctx, cancel := context.WithTimeout(context.Background(), jsCallTimeout)
	defer cancel()
	if strings.ContainsAny(id, ".*> \t") || id == "" {
		return Delivery{}, fmt.Errorf("%w: %q", ErrDeliveryNotFound, id)
	}
	if !b.cfg.Conn.IsConnected() {
		return Delivery{}, fmt.Errorf("%w: NATS %s", ErrClusterUnavailable, b.cfg.Conn.Status())
	}
	m, err := b.dead.GetLastMsgForSubject(ctx, b.deadSubject(h.cfg.Name, id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return Delivery{}, h.notDeadLocked(id)
	}
	if err != nil {
		return Delivery{}, unavailable("reading dead letter "+id, err)
	}
	if !b.cfg.Keys.CheckStored(m.Subject, m.Header, m.Data, "webhook dead letter") {
		return Delivery{}, fmt.Errorf("%w: %q (its dead letter is not signed with the cluster key)", ErrDeliveryNotFound, id)
	}
	var r record
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return Delivery{}, fmt.Errorf("egress: dead letter %s unreadable: %w", id, err)
	}
	d := r.delivery(m.Sequence)
	// A new message id: the dedupe window still knows the delivery_id.
	if _, err := b.js.PublishMsg(ctx, b.queueMsg(h.cfg.Name, d, d.id+"-retry-"+strconv.FormatUint(m.Sequence, 10))); err != nil {
		if fullOrTooBig(err) {
			return Delivery{}, fmt.Errorf("%w: %v", ErrQueueFull, err)
		}
		return Delivery{}, unavailable("queueing "+id+" again", err)
	}
	if err := b.dead.DeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		h.m.log.Warn("webhook: dead letter retried but not removed", "webhook", h.cfg.Name, "delivery_id", id, "error", err)
	}
	d.status = StatusQueued
	d.base = len(d.attempts)
	return d.view(h.cfg.Name), nil
}

// filter implements backend: only this process's own events. Every
// process queues its own, so each event is queued once for the cluster.
func (b *jsBackend) filter() lattice.Filter { return lattice.Filter{Local: true} }

// configured implements backend.
func (b *jsBackend) configured(h *hook) []any {
	return []any{"durable", "jetstream", "stream", b.cfg.Stream, "consumer", b.consumerName(h.cfg.Name)}
}

// start implements backend: one puller that feeds Concurrency senders.
func (b *jsBackend) start(ctx context.Context, h *hook) {
	h.m.wg.Go(func() { b.pull(ctx, h) })
}

// attempted implements backend: the attempt count lives with the process
// sending the delivery (a delivery's MaxAttempts count starts again on the
// process that takes it over).
func (b *jsBackend) attempted(*hook, *delivery, record) {}

// drain implements backend. What this process received is queued before
// it stops: those deliveries exist nowhere else yet. The subscription
// drains (every event the server had sent reaches Events, then it closes)
// and ingest ends once it has queued the rest, within ctx. (With NATS away
// nothing can be queued: the stop does not wait for it.)
func (b *jsBackend) drain(ctx context.Context, m *Module) {
	if !b.cfg.Conn.IsConnected() {
		return
	}
	if d, ok := m.sub.(interface{ Drain(context.Context) error }); ok {
		if err := d.Drain(ctx); err != nil {
			m.log.Warn("webhook: events received before the stop not all queued", "error", err)
		}
	} else {
		_ = m.sub.Close()
	}
	select {
	case <-m.ingestDone:
	case <-ctx.Done():
	}
}

// close implements backend: the connection is the lattice's, not closed
// here.
func (b *jsBackend) close(*Module) error { return nil }

// warnStranded warns of deliveries a run on the memory lattice left in the
// data dir: they are not sent on NATS.
func (b *jsBackend) warnStranded(m *Module) {
	if m.cfg.DataDir == "" {
		return
	}
	if _, err := os.Stat(filepath.Join(m.cfg.DataDir, DBFile)); err == nil {
		m.log.Warn("webhook deliveries stored in the data dir by a run on the memory lattice are not sent on NATS; "+
			"run once with lattice.backend memory to send them", "file", filepath.Join(m.cfg.DataDir, DBFile))
	}
}
