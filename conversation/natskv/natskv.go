// Package natskv is a [conversation.Store] on a NATS JetStream key-value
// bucket: the store of a cluster, where a conversation started through one
// daemon continues through another.
//
// # Layout
//
// One bucket (Config.Bucket, default axocoatl_conversations) holds, per
// conversation (its id base64url-encoded into one key token, E):
//
//	c.E.i            the Info and the list of the conversation's segments (JSON)
//	c.E.s.N.P        part P of segment N: one Append's messages (JSON), cut
//	                 to fit NATS max_payload, so a turn of 8 MiB is 9 parts
//	c.E.l            the turn lease, with a per-key TTL, renewed while the
//	                 turn runs (Config.LeaseRenew)
//
// A conversation's messages are read in one JetStream direct get of all
// its parts (up to 1,000 a request), not one Get per turn.
//
// An Append writes its parts under a fresh segment name, then adds the
// segment to c.E.i with an Update at the revision it read (optimistic
// concurrency: another daemon's write in between makes it read again and
// retry, keeping the parts): a reader sees a turn whole or not at all, and
// a daemon that dies between the two leaves parts no segment names (they
// go with the conversation).
//
// # Index
//
// Each Store follows every c.*.i of the bucket with a KV watch: an index in
// memory (the Info of every conversation, newest first, counts per agent,
// bytes in all) that [Store.List] pages through and eviction reads. It
// follows other daemons' writes within the time a message takes to arrive;
// Get, Messages, Append, Lock and Delete read the bucket itself. Eviction
// takes a conversation out with a purge at the revision it checked, after
// checking its lease: a conversation updated or locked since is not evicted
// (Lock rewrites c.E.i, so an eviction that read it before fails).
//
// # Delete
//
// [Store.Delete] purges the info key (KV purge, which leaves a marker: the
// key, no data, removed by JetStream after a minute, so that every
// daemon's watch sees the deletion), then every part and the lease with a
// stream purge by subject, which leaves nothing. With file storage the
// bytes of removed messages stay in the server's block files until
// JetStream compacts or drops those blocks; no API reads them.
//
// # Bounds
//
// The [conversation.Limits] as every store has them, and the bucket's own
// MaxBytes (Config.MaxBucketBytes), which JetStream enforces: a write past
// it fails with [conversation.ErrFull]. Two daemons creating a
// conversation of one agent at the same instant may each see room for it:
// max_per_agent and max_conversations can be passed by one per daemon
// until the next Create evicts back to the bound.
package natskv

import (
	"bytes"
	"container/list"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axocoatl/axocoatl-go/conversation"
)

// ErrNoJetStream: the NATS server (or the account) has no JetStream, where
// the bucket lives ([Open] fails with it; see [jetstream.ErrJetStreamNotEnabled]).
var ErrNoJetStream = errors.New("natskv: JetStream is not enabled on the NATS server (run it with -js)")

// DefaultBucket is the bucket's name when Config.Bucket is empty.
const DefaultBucket = "axocoatl_conversations"

// Config configures a [Store] for [Open]. The zero value of each field but
// Conn means its default.
type Config struct {
	// Conn is the NATS connection (with JetStream on the server). Required;
	// the Store does not close it.
	Conn *natsgo.Conn `yaml:"-"`
	// Bucket names the KV bucket. Zero: DefaultBucket. Daemons that share
	// conversations name the same bucket.
	Bucket string `yaml:"bucket"`
	// Replicas of the bucket's stream (1 to 5; a JetStream cluster of so
	// many servers). Zero: 1.
	Replicas int `yaml:"replicas"`
	// Memory keeps the bucket in the servers' memory instead of on disk
	// (gone when they restart). Zero: file storage.
	Memory bool `yaml:"memory"`
	// Limits bound the conversations (see [conversation.Limits]; its
	// [conversation.Limits.WithDefaults] apply).
	Limits conversation.Limits `yaml:",inline"`
	// MaxBucketBytes is the bucket's MaxBytes, a bound JetStream enforces
	// on everything it holds (the JSON framing and the Info entries take
	// room beside the bytes max_total_bytes counts). Zero: twice
	// Limits.MaxTotalBytes plus 64 MiB; negative: no bound.
	MaxBucketBytes int64 `yaml:"max_bucket_bytes"`
	// LeaseRenew is how often a turn's lease is renewed while the turn
	// runs; the lease key lives three times as long, so a daemon that dies
	// mid-turn keeps its conversation busy that long at most (not the
	// turn's whole ttl). Zero: 5s.
	LeaseRenew time.Duration `yaml:"lease_renew"`
	// Timeout bounds opening the bucket and reading its index. Zero: 30s.
	Timeout time.Duration `yaml:"timeout"`
	// Logger receives what goes wrong in the background (the index's
	// watch, a release that could not be written). Zero: discarded.
	Logger *slog.Logger `yaml:"-"`
}

// Validate checks c without connecting ([Open] calls it).
func (c Config) Validate() error {
	if c.Bucket != "" && !validBucket(c.Bucket) {
		return fmt.Errorf("natskv: bucket %q: letters, digits, - and _ only", c.Bucket)
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		return fmt.Errorf("natskv: replicas %d: 1 to 5", c.Replicas)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("natskv: timeout %s is negative", c.Timeout)
	}
	if c.LeaseRenew < 0 {
		return fmt.Errorf("natskv: lease_renew %s is negative", c.LeaseRenew)
	}
	return nil
}

func validBucket(b string) bool {
	if len(b) > 64 {
		return false
	}
	for _, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// markerTTL is how long the bucket keeps the marker of a purged key (a
// deleted conversation's info, a released lease): long enough for every
// daemon's index to see the deletion, then JetStream removes it.
const markerTTL = time.Minute

// maxCommitRetries bounds the optimistic-concurrency retries of one write
// (another daemon's write to the same conversation in between).
const maxCommitRetries = 32

// maxSweep bounds the conversations past idle_ttl one Create deletes.
const maxSweep = 32

// evictCandidates bounds the conversations one eviction tries (each costs
// a read of its lease) before it says none can go.
const evictCandidates = 16

// Store is a [conversation.Store] on a JetStream KV bucket. Open it with
// [Open]; it is safe for concurrent use, also by several processes on one
// bucket.
type Store struct {
	nc         *natsgo.Conn
	streamName string
	js         jetstream.JetStream
	kv         jetstream.KeyValue
	stream     jetstream.Stream
	subjPre    string // "$KV.<bucket>."
	limits     conversation.Limits
	maxValue   int // the largest value written: a part, an info
	log        *slog.Logger

	closed    atomic.Bool
	stopWatch context.CancelFunc
	watcher   jetstream.KeyWatcher
	done      chan struct{} // the watch loop ended

	recentMu sync.Mutex
	recent   map[string]recentInfo

	renew     time.Duration
	heldMu    sync.Mutex
	held      map[*held]struct{}
	stopRenew chan struct{}
	renewDone chan struct{}
	// renewStarted: Open started renewLoop (set before Open returns).
	renewStarted bool

	idx index
}

var _ conversation.Store = (*Store)(nil)

// Open creates (or updates) the bucket and reads its index; it returns once
// the index holds every conversation the bucket holds.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Conn == nil {
		return nil, errors.New("natskv: Conn is required")
	}
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.LeaseRenew == 0 {
		cfg.LeaseRenew = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	limits := cfg.Limits.WithDefaults()
	maxBytes := cfg.MaxBucketBytes
	switch {
	case maxBytes < 0 || maxBytes == 0 && limits.MaxTotalBytes > (1<<62):
		maxBytes = -1
	case maxBytes == 0:
		maxBytes = 2*limits.MaxTotalBytes + 64<<20
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("natskv: %w", err)
	}
	storage := jetstream.FileStorage
	if cfg.Memory {
		storage = jetstream.MemoryStorage
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "axocoatl conversations",
		History:     1,
		MaxBytes:    maxBytes,
		Storage:     storage,
		Replicas:    cfg.Replicas,
		// Per-key TTLs (the lease) need the stream's AllowMsgTTL, which a
		// limit marker TTL turns on; the markers of expired leases go
		// after it too.
		LimitMarkerTTL: markerTTL,
	})
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) || errors.Is(err, natsgo.ErrNoResponders) {
		return nil, fmt.Errorf("%w: bucket %s: %v", ErrNoJetStream, cfg.Bucket, err)
	}
	if err != nil {
		return nil, fmt.Errorf("natskv: bucket %s: %w", cfg.Bucket, err)
	}
	stream, err := js.Stream(ctx, "KV_"+cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("natskv: bucket %s: %w", cfg.Bucket, err)
	}
	s := &Store{
		nc: cfg.Conn, streamName: "KV_" + cfg.Bucket,
		js: js, kv: kv, stream: stream, subjPre: "$KV." + cfg.Bucket + ".",
		renew: cfg.LeaseRenew, held: map[*held]struct{}{}, recent: map[string]recentInfo{},
		stopRenew: make(chan struct{}), renewDone: make(chan struct{}),
		limits: limits, log: log,
		// Headroom under max_payload for the subject and headers.
		maxValue: int(max(cfg.Conn.MaxPayload()-8<<10, 4<<10)),
		done:     make(chan struct{}),
	}
	s.idx.init(maxIndex(limits))
	// The watch follows every info entry; its consumer outlives ctx (it
	// stops with Close), so it gets a context of its own, which Close
	// cancels (nats.go waits on it).
	wctx, wcancel := context.WithCancel(context.Background())
	s.stopWatch = wcancel
	w, err := kv.Watch(wctx, "c.*.i")
	if err != nil {
		wcancel()
		return nil, fmt.Errorf("natskv: watching bucket %s: %w", cfg.Bucket, err)
	}
	s.watcher = w
	ready := make(chan struct{})
	go s.watch(ready) // owned by the Store: Close stops the watcher, which ends it
	select {
	case <-ready:
		s.renewStarted = true
		go s.renewLoop() // owned by the Store: Close stops it
		return s, nil
	case <-s.done:
		err = errors.New("the watch ended")
	case <-ctx.Done():
		err = ctx.Err()
	}
	_ = s.Close()
	return nil, fmt.Errorf("natskv: reading the index of bucket %s: %w", cfg.Bucket, err)
}

// watch applies every change of an info entry to the index until the
// watcher stops; ready is closed once the initial values are in.
func (s *Store) watch(ready chan struct{}) {
	defer close(s.done)
	warned := false
	for e := range s.watcher.Updates() {
		if e == nil {
			close(ready)
			continue
		}
		id, ok := idOfInfoKey(e.Key())
		if !ok {
			continue
		}
		switch e.Operation() {
		case jetstream.KeyValuePut:
			var r record
			if err := json.Unmarshal(e.Value(), &r); err != nil {
				s.log.Warn("conversation store: an unreadable info entry", "key", e.Key(), "error", err)
				continue
			}
			if !s.idx.put(r.Info, e.Revision(), false) && !warned {
				warned = true
				s.log.Warn("conversation store: the bucket holds more conversations than this daemon's index keeps (max_conversations and a quarter): List and eviction do not see the rest", "index_max", s.idx.max)
			}
		default:
			s.idx.remove(id, e.Revision(), false)
		}
	}
	if !s.closed.Load() {
		s.log.Warn("conversation store: the index stopped following the bucket (List may miss other daemons' writes until restart)")
	}
}

// record is an info entry: the Info, and the segments holding the
// messages, in order.
type record struct {
	conversation.Info
	// Segs lists the segments, "K.N.P" joined by "," (a string: the
	// watch of every daemon reads each info, and a string of many
	// segments costs little to skip).
	Segs string `json:"segs,omitempty"`
}

// segment is one Append's messages: N of them, in P parts under c.E.s.K.
type segment struct {
	K string `json:"k"`
	N int    `json:"n"`
	P int    `json:"p"`
}

// lease is the value of a lease key.
type lease struct {
	// Until is when the lease ends if never released (Unix ns of the
	// taker's clock); the key's own TTL ends it on the server a little
	// later.
	Until int64 `json:"until"`
}

func enc(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

func infoKey(id string) string  { return "c." + enc(id) + ".i" }
func leaseKey(id string) string { return "c." + enc(id) + ".l" }
func partKey(id, seg string, p int) string {
	return "c." + enc(id) + ".s." + seg + "." + strconv.Itoa(p)
}

func idOfInfoKey(key string) (string, bool) {
	e, ok := strings.CutPrefix(key, "c.")
	if !ok {
		return "", false
	}
	if e, ok = strings.CutSuffix(e, ".i"); !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(e)
	return string(b), err == nil
}

func newSegName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Store) check(ctx context.Context) error {
	if s.closed.Load() {
		return conversation.ErrClosed
	}
	return ctx.Err()
}

// kvErr maps a bucket error: a write past MaxBytes is ErrFull.
func kvErr(what string, err error) error {
	var api *jetstream.APIError
	if errors.As(err, &api) && strings.Contains(api.Description, "maximum bytes exceeded") ||
		strings.Contains(err.Error(), "maximum bytes exceeded") {
		return fmt.Errorf("%w: the bucket is at its max_bucket_bytes: %s: %v", conversation.ErrFull, what, err)
	}
	return fmt.Errorf("natskv: %s: %w", what, err)
}

// read returns a conversation's record and its revision: ErrNotFound when
// absent, or idle past idle_ttl without a turn running.
func (s *Store) read(ctx context.Context, id string) (record, uint64, error) {
	var r record
	if !conversation.ValidID(id) {
		return r, 0, fmt.Errorf("%w: %q", conversation.ErrNotFound, id)
	}
	e, err := s.kv.Get(ctx, infoKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return r, 0, fmt.Errorf("%w: %q", conversation.ErrNotFound, id)
	}
	if err != nil {
		return r, 0, kvErr("reading conversation "+id, err)
	}
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return r, 0, fmt.Errorf("natskv: conversation %s: unreadable info: %w", id, err)
	}
	if time.Since(r.Updated) > s.limits.IdleTTL {
		if busy, err := s.busy(ctx, id); err != nil || !busy {
			return r, 0, fmt.Errorf("%w: %q (idle past idle_ttl)", conversation.ErrNotFound, id)
		}
	}
	s.remember(id, r, e.Revision())
	return r, e.Revision(), nil
}

// maxRecent bounds Store.recent.
const maxRecent = 1024

// recentInfo is an info as last read or written by this Store.
type recentInfo struct {
	r   record
	rev uint64
}

// remember keeps r at rev as the conversation's latest known info: the
// Engine reads a conversation's info just before it appends its turn,
// and the Append's Update at that revision proves it still current (or
// fails, and the Append reads it again).
func (s *Store) remember(id string, r record, rev uint64) {
	s.recentMu.Lock()
	defer s.recentMu.Unlock()
	if _, ok := s.recent[id]; !ok && len(s.recent) >= maxRecent {
		clear(s.recent)
	}
	if c, ok := s.recent[id]; !ok || c.rev < rev {
		s.recent[id] = recentInfo{r: r, rev: rev}
	}
}

func (s *Store) recall(id string) (record, uint64, bool) {
	s.recentMu.Lock()
	defer s.recentMu.Unlock()
	c, ok := s.recent[id]
	return c.r, c.rev, ok && time.Since(c.r.Updated) <= s.limits.IdleTTL
}

func (s *Store) forget(id string) {
	s.recentMu.Lock()
	defer s.recentMu.Unlock()
	delete(s.recent, id)
}

// busy reports whether a turn of the conversation holds its lease.
func (s *Store) busy(ctx context.Context, id string) (bool, error) {
	l, _, err := s.readLease(ctx, id)
	if err != nil {
		return false, err
	}
	return l.Until > time.Now().UnixNano(), nil
}

// readLease returns the lease and its revision; revision 0: none.
func (s *Store) readLease(ctx context.Context, id string) (lease, uint64, error) {
	var l lease
	e, err := s.kv.Get(ctx, leaseKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return l, 0, nil
	}
	if err != nil {
		return l, 0, kvErr("reading the lease of "+id, err)
	}
	if json.Unmarshal(e.Value(), &l) != nil {
		l.Until = 0 // unreadable: taken as ended
	}
	return l, e.Revision(), nil
}

// Create implements [conversation.Store.Create]: [conversation.ErrExists],
// [conversation.ErrInvalidID], [conversation.ErrFull] when no conversation
// can be evicted.
func (s *Store) Create(ctx context.Context, c conversation.Info) error {
	if !conversation.ValidID(c.ID) {
		return fmt.Errorf("%w: %q", conversation.ErrInvalidID, c.ID)
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	now := time.Now()
	s.sweep(ctx, now)
	for s.idx.agentCount(c.AgentID) >= s.limits.MaxPerAgent {
		ok, err := s.evict(ctx, func(e *entry) bool { return e.info.AgentID == c.AgentID && e.info.ID != c.ID })
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: agent %s has %d conversations (max_per_agent), none of those tried idle", conversation.ErrFull, c.AgentID, s.idx.agentCount(c.AgentID))
		}
	}
	for s.idx.count() >= s.limits.MaxConversations {
		ok, err := s.evict(ctx, func(e *entry) bool { return e.info.ID != c.ID })
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %d conversations (max_conversations), none of those tried idle", conversation.ErrFull, s.idx.count())
		}
	}
	if c.Created.IsZero() {
		c.Created = now
	}
	c.Updated, c.Messages, c.Bytes = c.Created, 0, 0
	data, err := json.Marshal(record{Info: c})
	if err != nil {
		return fmt.Errorf("natskv: %w", err)
	}
	rev, err := s.kv.Create(ctx, infoKey(c.ID), data)
	if errors.Is(err, jetstream.ErrKeyExists) {
		// It may be one idle past idle_ttl that no sweep removed yet.
		if _, _, rerr := s.read(ctx, c.ID); errors.Is(rerr, conversation.ErrNotFound) {
			if err := s.remove(ctx, c.ID, 0); err != nil {
				return err
			}
			rev, err = s.kv.Create(ctx, infoKey(c.ID), data)
		}
		if errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("%w: %q", conversation.ErrExists, c.ID)
		}
	}
	if err != nil {
		return kvErr("creating conversation "+c.ID, err)
	}
	// Old parts of a conversation of this id deleted by a daemon that
	// died before removing them are not named by the new record: they
	// are unreachable, and go with its Delete.
	s.idx.put(c, rev, true)
	return nil
}

// sweep deletes a few conversations idle past idle_ttl.
func (s *Store) sweep(ctx context.Context, now time.Time) {
	for range maxSweep {
		ok, err := s.evictFrom(ctx, s.idx.idle(now, s.limits.IdleTTL, evictCandidates))
		if err != nil || !ok {
			return
		}
	}
}

// evict deletes the least recently updated conversation that match
// accepts and that has no turn running; false when none of the oldest
// candidates can go.
func (s *Store) evict(ctx context.Context, match func(*entry) bool) (bool, error) {
	return s.evictFrom(ctx, s.idx.oldest(match, evictCandidates))
}

// evictFrom deletes the first of cands without a turn running that no one
// updated since the index saw it.
func (s *Store) evictFrom(ctx context.Context, cands []candidate) (bool, error) {
	for _, cand := range cands {
		if err := s.check(ctx); err != nil {
			return false, err
		}
		e, err := s.kv.Get(ctx, infoKey(cand.ID))
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			s.idx.remove(cand.ID, 0, true)
			continue
		}
		if err != nil {
			return false, kvErr("evicting", err)
		}
		if e.Revision() != cand.rev {
			// Written since the index saw it (another daemon's turn whose
			// report is on its way): not the least recent any more.
			var r record
			if json.Unmarshal(e.Value(), &r) == nil {
				s.idx.put(r.Info, e.Revision(), false)
			}
			continue
		}
		busy, err := s.busy(ctx, cand.ID)
		if err != nil {
			return false, err
		}
		if busy {
			continue
		}
		// A purge at the revision read: one updated or locked since (Lock
		// rewrites the info) stays.
		err = s.remove(ctx, cand.ID, e.Revision())
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		if err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// remove deletes a conversation for good: its info (at rev, if not 0) then
// its parts and lease.
func (s *Store) remove(ctx context.Context, id string, rev uint64) error {
	opts := []jetstream.KVDeleteOpt{jetstream.PurgeTTL(markerTTL)}
	if rev != 0 {
		opts = append(opts, jetstream.LastRevision(rev))
	}
	if err := s.kv.Purge(ctx, infoKey(id), opts...); err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || isWrongLast(err) {
			return fmt.Errorf("natskv: conversation %s changed: %w", id, jetstream.ErrKeyRevisionMismatch)
		}
		return kvErr("deleting conversation "+id, err)
	}
	s.idx.remove(id, 0, true)
	s.forget(id)
	// A stream purge by subject leaves no marker behind.
	if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.subjPre+"c."+enc(id)+".s.>")); err != nil {
		return fmt.Errorf("natskv: deleting the messages of conversation %s: %w", id, err)
	}
	if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.subjPre+leaseKey(id))); err != nil {
		return fmt.Errorf("natskv: deleting the lease of conversation %s: %w", id, err)
	}
	return nil
}

func isWrongLast(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Get implements [conversation.Store.Get], reading the bucket (not the
// index): [conversation.ErrNotFound].
func (s *Store) Get(ctx context.Context, id string) (conversation.Info, error) {
	if err := s.check(ctx); err != nil {
		return conversation.Info{}, err
	}
	r, _, err := s.read(ctx, id)
	return r.Info, err
}

// Messages implements [conversation.Store.Messages].
func (s *Store) Messages(ctx context.Context, id string, from, limit int) ([]conversation.Message, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	r, _, err := s.read(ctx, id)
	if err != nil {
		return nil, err
	}
	from = min(max(from, 0), r.Messages)
	to := r.Messages
	if limit > 0 && from+limit < to {
		to = from + limit
	}
	if from == to {
		return []conversation.Message{}, nil
	}
	// The segments holding [from, to): their parts read in batches, each
	// segment then decoded on its own.
	segs, err := parseSegs(r.Segs)
	if err != nil {
		return nil, fmt.Errorf("natskv: conversation %s: %w", id, err)
	}
	type want struct {
		seg   segment
		first int // index of its first message
	}
	var wants []want
	var keys []string
	at := 0
	for _, sg := range segs {
		if at+sg.N > from && at < to {
			wants = append(wants, want{seg: sg, first: at})
			for p := range sg.P {
				keys = append(keys, partKey(id, sg.K, p))
			}
		}
		at += sg.N
	}
	parts, err := s.getMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]conversation.Message, 0, to-from)
	var buf bytes.Buffer
	for _, w := range wants {
		buf.Reset()
		for p := range w.seg.P {
			part, ok := parts[partKey(id, w.seg.K, p)]
			if !ok {
				// Deleted since the info was read.
				return nil, fmt.Errorf("%w: %q (deleted while read)", conversation.ErrNotFound, id)
			}
			buf.Write(part)
		}
		var msgs []conversation.Message
		if err := json.Unmarshal(buf.Bytes(), &msgs); err != nil {
			return nil, fmt.Errorf("natskv: conversation %s: unreadable segment %s: %w", id, w.seg.K, err)
		}
		if len(msgs) != w.seg.N {
			return nil, fmt.Errorf("natskv: conversation %s: segment %s holds %d messages, its info says %d", id, w.seg.K, len(msgs), w.seg.N)
		}
		lo, hi := max(from-w.first, 0), min(to-w.first, len(msgs))
		out = append(out, msgs[lo:hi]...)
	}
	return out, nil
}

// batchKeys bounds the keys of one batched read (JetStream answers at
// most 1,024 subjects per request), batchRequestBytes its request.
const (
	batchKeys         = 1000
	batchRequestBytes = 64 << 10
)

// getMany reads keys' values: in batches (one JetStream direct get of
// many subjects each: a conversation of 100 turns is one round trip, not
// 100), then one by one for what a batch left out (a batch stops at the
// server's max_pending bytes). A key absent is absent from the map.
func (s *Store) getMany(ctx context.Context, keys []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(keys))
	for len(keys) > 0 {
		n, size := 0, 0
		for n < len(keys) && n < batchKeys && size+len(keys[n])+len(s.subjPre)+4 < batchRequestBytes {
			size += len(keys[n]) + len(s.subjPre) + 4
			n++
		}
		if err := s.directBatch(ctx, keys[:n], out); err != nil {
			return nil, err
		}
		keys = keys[n:]
	}
	return out, nil
}

// directBatch asks for the last message of each key's subject at once,
// then reads the missing ones one by one.
func (s *Store) directBatch(ctx context.Context, keys []string, out map[string][]byte) error {
	subjects := make([]string, len(keys))
	for i, k := range keys {
		subjects[i] = s.subjPre + k
	}
	req, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
	}{subjects})
	if err != nil {
		return fmt.Errorf("natskv: %w", err)
	}
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return fmt.Errorf("natskv: reading messages: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+s.streamName, inbox, req); err != nil {
		return fmt.Errorf("natskv: reading messages: %w", err)
	}
	bctx, cancel := context.WithTimeout(ctx, batchTimeout)
	defer cancel()
	for {
		m, err := sub.NextMsgWithContext(bctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			break // no end of batch in time: the rest one by one
		}
		if st := m.Header.Get("Status"); st != "" {
			break // 204: the end; 404: none; 413 and others: one by one
		}
		subj := m.Header.Get("Nats-Subject")
		if subj == "" {
			break // not a message of the batch (a server before batched reads answers with an error): one by one
		}
		if k, ok := strings.CutPrefix(subj, s.subjPre); ok && m.Header.Get("KV-Operation") == "" {
			out[k] = m.Data
		}
	}
	for _, k := range keys {
		if _, ok := out[k]; ok {
			continue
		}
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return kvErr("reading messages", err)
		}
		out[k] = e.Value()
	}
	return nil
}

// batchTimeout bounds waiting for one batched read's end.
const batchTimeout = 10 * time.Second

// parseSegs reads an info's segment list: "K.N.P" entries joined by ",".
func parseSegs(s string) ([]segment, error) {
	if s == "" {
		return nil, nil
	}
	out := make([]segment, 0, strings.Count(s, ",")+1)
	for e := range strings.SplitSeq(s, ",") {
		k, rest, ok1 := strings.Cut(e, ".")
		ns, ps, ok2 := strings.Cut(rest, ".")
		n, err1 := strconv.Atoi(ns)
		p, err2 := strconv.Atoi(ps)
		if !ok1 || !ok2 || err1 != nil || err2 != nil || k == "" || n < 0 || p < 0 {
			return nil, fmt.Errorf("malformed segment list at %q", e)
		}
		out = append(out, segment{K: k, N: n, P: p})
	}
	return out, nil
}

// appendSeg adds sg to a segment list.
func appendSeg(s string, sg segment) string {
	e := sg.K + "." + strconv.Itoa(sg.N) + "." + strconv.Itoa(sg.P)
	if s == "" {
		return e
	}
	return s + "," + e
}

// Append implements [conversation.Store.Append].
func (s *Store) Append(ctx context.Context, id string, msgs []conversation.Message) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	var size int64
	for _, m := range msgs {
		size += int64(conversation.Size(m))
	}
	data, err := json.Marshal(msgs)
	if err != nil {
		return fmt.Errorf("natskv: %w", err)
	}
	sg := segment{K: newSegName(), N: len(msgs), P: (len(data) + s.maxValue - 1) / s.maxValue}
	written := false
	// The parts are left to no one if the turn is not recorded.
	defer func() {
		if written {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := s.stream.Purge(cctx, jetstream.WithPurgeSubject(s.subjPre+"c."+enc(id)+".s."+sg.K+".>")); err != nil {
				s.log.Warn("conversation store: the parts of an unrecorded turn were not removed", "conversation", id, "error", err)
			}
		}
	}()
	for attempt := 0; ; attempt++ {
		r, rev, ok := s.recall(id)
		if attempt > 0 || !ok {
			var err error
			if r, rev, err = s.read(ctx, id); err != nil {
				return err
			}
		}
		if err := conversation.CheckAppend(s.limits, r.Info, len(msgs), size); err != nil {
			return err
		}
		if !written && attempt == 0 {
			for s.idx.totalBytes()+size > s.limits.MaxTotalBytes {
				ok, err := s.evict(ctx, func(e *entry) bool { return e.info.ID != id })
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("%w: the store holds %d bytes (max_total_bytes %d) and no other conversation can be evicted", conversation.ErrFull, s.idx.totalBytes(), s.limits.MaxTotalBytes)
				}
			}
		}
		if !written && len(msgs) > 0 {
			written = true
			for p := range sg.P {
				part := data[p*s.maxValue : min((p+1)*s.maxValue, len(data))]
				if _, err := s.kv.Put(ctx, partKey(id, sg.K, p), part); err != nil {
					return kvErr("writing conversation "+id, err)
				}
			}
		}
		now := time.Now()
		if now.Before(r.Updated) { // another host's clock ahead: keep the order
			now = r.Updated
		}
		if len(msgs) > 0 {
			r.Segs = appendSeg(r.Segs, sg)
		}
		r.Messages += len(msgs)
		r.Bytes += size
		r.Updated = now
		info, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("natskv: %w", err)
		}
		if len(info) > s.maxValue {
			return fmt.Errorf("%w: conversation %s has %d turns, whose list no longer fits a NATS message (max_payload): start a new conversation", conversation.ErrFull, id, strings.Count(r.Segs, ",")+1)
		}
		newRev, err := s.kv.Update(ctx, infoKey(id), info, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) && attempt < maxCommitRetries {
			continue // written by another in between: read it again
		}
		if err != nil {
			return kvErr("recording the turn of conversation "+id, err)
		}
		written = false // recorded: the parts are the conversation's
		s.remember(id, r, newRev)
		s.idx.put(r.Info, newRev, true)
		return nil
	}
}

// List implements [conversation.Store.List], from the index, paged by
// [conversation.CursorOf] cursors.
func (s *Store) List(ctx context.Context, q conversation.Query) (conversation.Page, error) {
	after, err := conversation.ParseCursor(q.Cursor)
	if err != nil {
		return conversation.Page{}, err
	}
	if err := s.check(ctx); err != nil {
		return conversation.Page{}, err
	}
	return s.idx.list(q, after, conversation.PageLimit(q.Limit), s.limits.IdleTTL), nil
}

// Delete implements [conversation.Store.Delete]: the conversation's info,
// messages and lease are purged from the stream (see the package doc for
// what JetStream keeps).
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if _, _, err := s.read(ctx, id); err != nil {
		return err
	}
	return s.remove(ctx, id, 0)
}

// Lock implements [conversation.Store.Lock]: a lease key created only if
// absent, with a per-key TTL of three Config.LeaseRenew, renewed by this
// Store while the turn runs, until release or ttl. The lease also holds its
// end to the nanosecond: past it another Lock takes it over, whether or not
// the server removed the key yet.
func (s *Store) Lock(ctx context.Context, id string, ttl time.Duration) (func(), error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	r, rev, err := s.read(ctx, id)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	h := &held{id: id, key: leaseKey(id), end: now.Add(ttl)}
	h.until = s.leaseUntil(h.end, now)
	val, keyTTL := leaseValue(h.until, now)
	lrev, err := s.kv.Create(ctx, h.key, val, jetstream.KeyTTL(keyTTL))
	if errors.Is(err, jetstream.ErrKeyExists) {
		cur, crev, rerr := s.readLease(ctx, id)
		if rerr != nil {
			return nil, rerr
		}
		if crev != 0 && cur.Until > time.Now().UnixNano() {
			return nil, fmt.Errorf("%w: %s", conversation.ErrBusy, id)
		}
		// Ended but not yet removed by the server: taken over, at the
		// revision read (another taker in between wins).
		if crev != 0 {
			if perr := s.kv.Purge(ctx, h.key, jetstream.LastRevision(crev), jetstream.PurgeTTL(markerTTL)); perr != nil && !isMismatch(perr) {
				return nil, kvErr("taking over the lease of "+id, perr)
			}
		}
		lrev, err = s.kv.Create(ctx, h.key, val, jetstream.KeyTTL(keyTTL))
		if errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("%w: %s", conversation.ErrBusy, id)
		}
	}
	if err != nil {
		return nil, kvErr("taking the lease of "+id, err)
	}
	h.rev = lrev
	s.heldMu.Lock()
	s.held[h] = struct{}{}
	s.heldMu.Unlock()
	var once sync.Once
	release := func() { once.Do(func() { s.release(h) }) }
	// Rewrite the info at the revision read, so that an eviction that
	// read it before the lease existed fails its purge.
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if r, rev, err = s.read(ctx, id); err != nil {
				release()
				return nil, err
			}
		}
		data, err := json.Marshal(r)
		if err != nil {
			release()
			return nil, fmt.Errorf("natskv: %w", err)
		}
		newRev, err := s.kv.Update(ctx, infoKey(id), data, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) && attempt < maxCommitRetries {
			continue
		}
		if err != nil {
			release()
			return nil, kvErr("locking conversation "+id, err)
		}
		s.remember(id, r, newRev)
		s.idx.put(r.Info, newRev, true)
		return release, nil
	}
}

// held is a lease this Store holds.
type held struct {
	id, key string
	end     time.Time // the ttl Lock was given ends
	// Under Store.heldMu:
	rev      uint64    // the lease key's revision
	until    time.Time // the lease's end as written
	renewing bool      // a renewal is being written
	released bool
}

// leaseUntil is the end a lease written at now says: three renew intervals
// on, or end if sooner.
func (s *Store) leaseUntil(end, now time.Time) time.Time {
	if u := now.Add(3 * s.renew); u.Before(end) {
		return u
	}
	return end
}

// leaseValue is a lease's value and its key's TTL: whole seconds (what
// JetStream keeps), at least one, past until.
func leaseValue(until, now time.Time) ([]byte, time.Duration) {
	val, _ := json.Marshal(lease{Until: until.UnixNano()})
	return val, until.Sub(now).Truncate(time.Second) + time.Second
}

func isMismatch(err error) bool {
	return isWrongLast(err) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// release ends h: the lease key is purged at its revision only (a lease
// taken over after it ended is another's). A renewal being written
// purges it when it is done.
func (s *Store) release(h *held) {
	s.heldMu.Lock()
	h.released = true
	delete(s.held, h)
	rev, renewing := h.rev, h.renewing
	s.heldMu.Unlock()
	if !renewing {
		s.purgeLease(h, rev)
	}
}

func (s *Store) purgeLease(h *held, rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.kv.Purge(ctx, h.key, jetstream.LastRevision(rev), jetstream.PurgeTTL(markerTTL))
	if err != nil && !isMismatch(err) && !s.closed.Load() {
		s.log.Warn("conversation store: a lease was not released (it ends with its ttl)", "conversation", h.id, "error", err)
	}
}

// renewLoop renews the held leases every renew interval until Close.
func (s *Store) renewLoop() {
	defer close(s.renewDone)
	t := time.NewTicker(s.renew)
	defer t.Stop()
	for {
		select {
		case <-s.stopRenew:
			return
		case <-t.C:
		}
		now := time.Now()
		s.heldMu.Lock()
		var due []*held
		for h := range s.held {
			if !h.renewing && h.until.Before(h.end) {
				h.renewing = true
				due = append(due, h)
			}
		}
		s.heldMu.Unlock()
		for _, h := range due {
			s.renewOne(h, now)
		}
	}
}

// renewOne writes h's lease again at its revision, with a later end.
func (s *Store) renewOne(h *held, now time.Time) {
	s.heldMu.Lock()
	rev := h.rev
	s.heldMu.Unlock()
	until := s.leaseUntil(h.end, now)
	val, ttl := leaseValue(until, now)
	ctx, cancel := context.WithTimeout(context.Background(), s.renew)
	defer cancel()
	msg := &natsgo.Msg{Subject: s.subjPre + h.key, Data: val}
	ack, err := s.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttl))
	s.heldMu.Lock()
	h.renewing = false
	if err == nil {
		h.rev, h.until = ack.Sequence, until
	} else if isMismatch(err) {
		delete(s.held, h) // taken over (it had ended) or deleted: no longer ours
	}
	released, rev := h.released, h.rev
	s.heldMu.Unlock()
	if err != nil && !isMismatch(err) && !s.closed.Load() {
		s.log.Warn("conversation store: a lease was not renewed", "conversation", h.id, "error", err)
	}
	if released {
		s.purgeLease(h, rev)
	}
}

// Limits implements [conversation.Store.Limits].
func (s *Store) Limits() conversation.Limits { return s.limits }

// Close implements [conversation.Store.Close]: it stops the index's watch
// ([jetstream.KeyWatcher.Stop]) and the lease renewals; later calls fail
// with [conversation.ErrClosed].
// The bucket and the connection stay.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.watcher != nil {
		_ = s.watcher.Stop()
		<-s.done
	}
	if s.stopWatch != nil {
		s.stopWatch()
	}
	close(s.stopRenew)
	if s.renewStarted {
		<-s.renewDone
	}
	return nil
}

// index is the Store's view of every conversation of the bucket.
type index struct {
	// max bounds the entries: the bucket may hold more than this Store's
	// max_conversations (another daemon's config, a NATS user writing to
	// it), and the index must not follow it without bound.
	max int

	mu       sync.Mutex
	byID     map[string]*entry
	recency  *list.List // of *entry, newest (Updated, then ID) first
	perAgent map[string]int
	total    int64
	// gone holds the revision a conversation had when this Store deleted
	// it, until the watch reports the deletion: an update of it the watch
	// delivers late must not bring it back.
	gone map[string]uint64
}

type entry struct {
	info conversation.Info
	rev  uint64
	elem *list.Element
}

// maxGone bounds index.gone (deletions whose report the watch has not yet
// delivered).
const maxGone = 4096

// maxIndex is the bound of the index: max_conversations and a quarter
// (two daemons creating at once may pass it for a moment).
func maxIndex(l conversation.Limits) int {
	if l.MaxConversations > (1<<31)/2 {
		return l.MaxConversations // no bound
	}
	return l.MaxConversations + l.MaxConversations/4 + 64
}

func (x *index) init(max int) {
	x.max = max
	x.byID, x.recency, x.perAgent, x.gone = map[string]*entry{}, list.New(), map[string]int{}, map[string]uint64{}
}

// newer reports whether a comes before b in the newest-first order.
func newer(a, b conversation.Info) bool {
	if !a.Updated.Equal(b.Updated) {
		return a.Updated.After(b.Updated)
	}
	return a.ID > b.ID
}

// put records info at rev, unless the index knows a later revision of it
// (or its deletion). local: the Store's own write.
// It reports false when the index is full (max) and info was left out.
func (x *index) put(info conversation.Info, rev uint64, local bool) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if g, ok := x.gone[info.ID]; ok {
		if rev <= g {
			return true
		}
		delete(x.gone, info.ID)
	}
	e, ok := x.byID[info.ID]
	if ok {
		if e.rev >= rev {
			return true
		}
		x.total -= e.info.Bytes
		if e.info.AgentID != info.AgentID {
			x.dropAgentLocked(e.info.AgentID)
			x.perAgent[info.AgentID]++
		}
		x.recency.Remove(e.elem)
	} else {
		if len(x.byID) >= x.max {
			return false
		}
		e = &entry{}
		x.byID[info.ID] = e
		x.perAgent[info.AgentID]++
	}
	e.info, e.rev = info, rev
	x.total += info.Bytes
	// From the front: an update is almost always the newest.
	at := x.recency.Front()
	for at != nil && newer(at.Value.(*entry).info, info) {
		at = at.Next()
	}
	if at == nil {
		e.elem = x.recency.PushBack(e)
	} else {
		e.elem = x.recency.InsertBefore(e, at)
	}
	return true
}

// remove drops a conversation: with local (this Store deleted it) at
// whatever revision, else if rev is past the one known.
func (x *index) remove(id string, rev uint64, local bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.byID[id]
	if !local {
		delete(x.gone, id) // the watch delivered the deletion
		if ok && e.rev >= rev {
			return
		}
	}
	if !ok {
		return
	}
	if local {
		if len(x.gone) >= maxGone {
			clear(x.gone) // at worst a deleted one shows until its marker arrives
		}
		x.gone[id] = e.rev
	}
	x.recency.Remove(e.elem)
	delete(x.byID, id)
	x.dropAgentLocked(e.info.AgentID)
	x.total -= e.info.Bytes
}

func (x *index) dropAgentLocked(agentID string) {
	if x.perAgent[agentID]--; x.perAgent[agentID] <= 0 {
		delete(x.perAgent, agentID)
	}
}

func (x *index) agentCount(agentID string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.perAgent[agentID]
}

func (x *index) count() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.byID)
}

func (x *index) totalBytes() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.total
}

// candidate is a conversation an eviction may take, at the revision the
// index knows.
type candidate struct {
	conversation.Info
	rev uint64
}

// oldest returns up to n of the least recently updated conversations that
// match accepts, oldest first.
func (x *index) oldest(match func(*entry) bool, n int) []candidate {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []candidate
	for el := x.recency.Back(); el != nil && len(out) < n; el = el.Prev() {
		if e := el.Value.(*entry); match(e) {
			out = append(out, candidate{e.info, e.rev})
		}
	}
	return out
}

// idle returns up to n of the conversations not updated for longer than
// ttl, oldest first (they are at the back: the walk stops at the first
// one updated since).
func (x *index) idle(now time.Time, ttl time.Duration, n int) []candidate {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []candidate
	for el := x.recency.Back(); el != nil && len(out) < n; el = el.Prev() {
		e := el.Value.(*entry)
		if now.Sub(e.info.Updated) <= ttl {
			break
		}
		out = append(out, candidate{e.info, e.rev})
	}
	return out
}

func (x *index) list(q conversation.Query, after conversation.Cursor, limit int, idle time.Duration) conversation.Page {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := time.Now()
	var p conversation.Page
	for el := x.recency.Front(); el != nil; el = el.Next() {
		info := el.Value.(*entry).info
		if q.AgentID != "" && info.AgentID != q.AgentID {
			continue
		}
		if now.Sub(info.Updated) > idle {
			continue
		}
		if q.Cursor != "" && !after.Before(info) {
			continue
		}
		if len(p.Conversations) == limit {
			p.Next = conversation.CursorOf(p.Conversations[limit-1])
			break
		}
		p.Conversations = append(p.Conversations, info)
	}
	return p
}
