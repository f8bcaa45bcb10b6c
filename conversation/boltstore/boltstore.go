// Package boltstore is a [conversation.Store] in one bbolt file
// (conversations.db in the daemon's data dir): nothing to start, and
// conversations survive restarts.
//
// # Layout
//
// Every operation touches a few keys, however many conversations the file
// holds (100,000 by default):
//
//   - "info": conversation id → its [conversation.Info] (JSON);
//   - "msgs": one bucket per conversation, named by its id, holding its
//     messages (a compact binary record each) keyed by their 8-byte
//     big-endian index;
//   - "recency": updated (8-byte big-endian Unix nanoseconds) + id → the
//     agent's id: [Store.List] pages backwards from a cursor, eviction
//     and idle_ttl take the front;
//   - "agents": one bucket per agent, the same updated + id keys: an
//     agent's pages and its own eviction;
//   - "counts": agent id → its number of conversations (8 bytes), and
//     under "meta" the store's count and bytes.
//
// # Durability
//
// Each write is a bbolt transaction, committed (fsync'd) before the call
// returns; appends that arrive while one commits share the next
// transaction (one fsync for all). A crash, of the process or of the
// machine, loses at most the turns being written, never an earlier one,
// and the file opens again. The freelist is not written at each commit
// (bbolt's NoFreelistSync): Open rebuilds it by reading the file's page
// headers, which costs time at start in proportion to the file's size.
// [Options].NoSync turns the fsync off (a machine crash may then lose
// recent turns or corrupt the file; a process crash loses nothing
// committed): for tests and throwaway data only.
//
// # One process
//
// bbolt lets one process at a time open the file (an flock): a second
// [Open] waits [Options].OpenTimeout and fails with [ErrInUse]. Turn
// leases ([Store.Lock]) are kept in this process's memory: they need no
// disk write, and no other process can reach the file to contend for
// them; after a crash they are gone with the process. [OpenShared] holds
// the file only during each operation, for a process that shares it with
// one that may start later (`axocoatl mcp serve` beside the daemon).
//
// # Deletion
//
// [Store.Delete] (and eviction) remove a conversation's keys and messages
// in one transaction. bbolt does not zero the pages it frees: the deleted
// text stays readable in free pages of the file until bbolt reuses them
// for new writes, and the file never shrinks. [Compact] copies the live
// data to a new file and replaces the old one, leaving no deleted text in
// it (the filesystem may keep the old blocks until it reuses them).
package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/axocoatl/axocoatl-go/conversation"
)

// FileName is the store's file in the daemon's data dir.
const FileName = "conversations.db"

// ErrInUse: another process holds the file open (bbolt allows one).
var ErrInUse = errors.New("conversation store in use by another process")

// DefaultOpenTimeout is Options.OpenTimeout when zero.
const DefaultOpenTimeout = 5 * time.Second

// Options tune [Open]. The zero value is the documented defaults.
type Options struct {
	// Limits bound the store ([conversation.Limits]; zero fields: their
	// defaults).
	Limits conversation.Limits
	// OpenTimeout is how long Open waits for another process to close
	// the file before failing with ErrInUse. Zero: 5s; negative: do not
	// wait.
	OpenTimeout time.Duration
	// NoSync skips the fsync of each commit. A process crash still loses
	// nothing committed (the kernel has the pages), a machine crash may
	// lose recent turns or leave the file unreadable. Zero: fsync every
	// commit.
	NoSync bool
}

var (
	bucketInfo    = []byte("info")
	bucketMsgs    = []byte("msgs")
	bucketRecency = []byte("recency")
	bucketAgents  = []byte("agents")
	bucketCounts  = []byte("counts")
	bucketMeta    = []byte("meta")
	keyCount      = []byte("conversations")
	keyBytes      = []byte("bytes")
)

// maxExpirePerCreate bounds the conversations past idle_ttl one Create
// deletes, so that one call never turns into a sweep of the whole file;
// the rest are invisible already (every read checks the ttl) and go with
// the next calls or with eviction, which takes the oldest first.
const maxExpirePerCreate = 256

// Store is a [conversation.Store] in a bbolt file. It is safe for
// concurrent use.
type Store struct {
	db     *bolt.DB // nil when shared: opened per operation
	path   string
	limits conversation.Limits
	// shared: [OpenShared]'s store; bopts open the file for each
	// operation, one at a time (borrow).
	shared bool
	bopts  *bolt.Options
	borrow chan struct{}

	// gmu guards the group commit of Append: the appends waiting and
	// whether a caller is committing (never held across the commit).
	gmu     sync.Mutex
	pending []*appendOp
	leading bool

	// mu guards the leases and closed; it is never held across a bbolt
	// call.
	mu     sync.Mutex
	closed bool
	leases map[string]lease
	seq    uint64
}

type lease struct {
	seq   uint64
	until time.Time
}

var _ conversation.Store = (*Store)(nil)

// Open opens (creating it and its directory if missing) the store at
// path, a bbolt file readable by its owner only, and holds it until
// Close.
func Open(path string, opts Options) (*Store, error) {
	s := newStore(path, opts)
	db, err := s.openDB()
	if err != nil {
		return nil, err
	}
	s.db = db
	return s, nil
}

// OpenShared is [Open] for a process that shares the file with another
// one that may start later (`axocoatl mcp serve` beside a daemon on one
// data dir): it holds the file only during each operation (opening it
// then, waiting at most Options.OpenTimeout for the other process), so
// that the other one can open it between two. It fails with ErrInUse when
// the file is held now. Each operation pays an open of the file (a read
// of its meta pages and freelist) and they run one at a time. Leases are
// this process's, as with Open: a turn through it and one through the
// other process may overlap only if the other opened the file meanwhile,
// after which every write here fails with ErrInUse.
func OpenShared(path string, opts Options) (*Store, error) {
	s := newStore(path, opts)
	db, err := s.openDB()
	if err != nil {
		return nil, err
	}
	if err := db.Close(); err != nil {
		return nil, fmt.Errorf("conversations: %s: %w", path, err)
	}
	s.shared, s.borrow = true, make(chan struct{}, 1)
	return s, nil
}

func newStore(path string, opts Options) *Store {
	timeout := opts.OpenTimeout
	switch {
	case timeout == 0:
		timeout = DefaultOpenTimeout
	case timeout < 0:
		// bbolt reads 0 as "wait forever": the shortest real wait instead.
		timeout = time.Millisecond
	}
	return &Store{
		path: path, limits: opts.Limits.WithDefaults(), leases: map[string]lease{},
		bopts: &bolt.Options{Timeout: timeout, NoSync: opts.NoSync, NoFreelistSync: true, FreelistType: bolt.FreelistMapType},
	}
}

// openDB opens the file and makes its buckets when they are missing.
func (s *Store) openDB() (*bolt.DB, error) {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return nil, fmt.Errorf("conversations: %w", err)
	}
	db, err := bolt.Open(s.path, 0o600, s.bopts)
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("conversations: open %s: %w (waited %s)", s.path, ErrInUse, s.bopts.Timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("conversations: open %s: %w", s.path, err)
	}
	missing := false
	_ = db.View(func(tx *bolt.Tx) error {
		missing = tx.Bucket(bucketMeta) == nil
		return nil
	})
	if missing {
		err = db.Update(func(tx *bolt.Tx) error {
			for _, name := range [][]byte{bucketInfo, bucketMsgs, bucketRecency, bucketAgents, bucketCounts, bucketMeta} {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("conversations: open %s: %w", s.path, err)
	}
	return db, nil
}

// Path is the store's file.
func (s *Store) Path() string { return s.path }

// Limits implements [conversation.Store.Limits].
func (s *Store) Limits() conversation.Limits { return s.limits }

// Close implements [conversation.Store.Close]; it waits for the
// transactions in progress.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.leases = nil
	s.mu.Unlock()
	if s.db == nil {
		return nil
	}
	return s.db.Close()
}

func (s *Store) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return conversation.ErrClosed
	}
	return nil
}

// txErr maps bbolt's error for a closed file to ErrClosed (Close ran
// between begin and the transaction) and wraps the others.
func txErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bolterrors.ErrDatabaseNotOpen):
		return conversation.ErrClosed
	case errors.Is(err, conversation.ErrNotFound), errors.Is(err, conversation.ErrExists), errors.Is(err, conversation.ErrFull):
		return err
	}
	return fmt.Errorf("conversations: %w", err)
}

func (s *Store) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	return s.with(ctx, func(db *bolt.DB) error { return db.Update(fn) })
}

func (s *Store) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	return s.with(ctx, func(db *bolt.DB) error { return db.View(fn) })
}

// with runs fn on the open file; a shared store opens it for fn and
// closes it after. The borrow runs one at a time: bbolt's lock is an
// flock, which a second open of the file conflicts with even in this
// process. A caller waiting for its turn stops with its ctx.
func (s *Store) with(ctx context.Context, fn func(*bolt.DB) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if !s.shared {
		return txErr(fn(s.db))
	}
	select {
	case s.borrow <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.borrow }()
	if err := s.begin(ctx); err != nil {
		return err
	}
	db, err := s.openDB()
	if err != nil {
		return err
	}
	return errors.Join(txErr(fn(db)), db.Close())
}

// busy reports whether id's lease is held at now.
func (s *Store) busy(id string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[id]
	return ok && now.Before(l.until)
}

func (s *Store) expired(c conversation.Info, now time.Time) bool {
	return now.Sub(c.Updated) > s.limits.IdleTTL && !s.busy(c.ID, now)
}

// orderKey is the recency and agent index key: updated then id, so that
// bytes order as (Updated, ID) do.
func orderKey(updated time.Time, id string) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, uint64(updated.UnixNano()))
	return append(k, id...)
}

func idOfKey(k []byte) string { return string(k[8:]) }

func seqKey(i int) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(i))
	return k[:]
}

func getInfo(tx *bolt.Tx, id string) (conversation.Info, bool, error) {
	v := tx.Bucket(bucketInfo).Get([]byte(id))
	if v == nil {
		return conversation.Info{}, false, nil
	}
	var c conversation.Info
	if err := json.Unmarshal(v, &c); err != nil {
		return c, false, fmt.Errorf("conversation %s: unreadable record: %w", id, err)
	}
	return c, true, nil
}

func putInfo(tx *bolt.Tx, c conversation.Info) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketInfo).Put([]byte(c.ID), b)
}

func getUint(b *bolt.Bucket, k []byte) int64 {
	v := b.Get(k)
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

func addUint(b *bolt.Bucket, k []byte, d int64) error {
	n := getUint(b, k) + d
	if n <= 0 {
		return b.Delete(k)
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(n))
	return b.Put(k, v[:])
}

// index puts c at its place in the recency and agent orders.
func index(tx *bolt.Tx, c conversation.Info) error {
	k := orderKey(c.Updated, c.ID)
	if err := tx.Bucket(bucketRecency).Put(k, []byte(c.AgentID)); err != nil {
		return err
	}
	ab, err := tx.Bucket(bucketAgents).CreateBucketIfNotExists([]byte(c.AgentID))
	if err != nil {
		return err
	}
	return ab.Put(k, nil)
}

// unindex removes c from the recency and agent orders.
func unindex(tx *bolt.Tx, c conversation.Info) error {
	k := orderKey(c.Updated, c.ID)
	if err := tx.Bucket(bucketRecency).Delete(k); err != nil {
		return err
	}
	if ab := tx.Bucket(bucketAgents).Bucket([]byte(c.AgentID)); ab != nil {
		return ab.Delete(k)
	}
	return nil
}

// remove deletes c and its messages, and counts it out.
func remove(tx *bolt.Tx, c conversation.Info) error {
	if err := unindex(tx, c); err != nil {
		return err
	}
	if err := tx.Bucket(bucketInfo).Delete([]byte(c.ID)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketMsgs).DeleteBucket([]byte(c.ID)); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
		return err
	}
	counts, meta := tx.Bucket(bucketCounts), tx.Bucket(bucketMeta)
	if err := addUint(counts, []byte(c.AgentID), -1); err != nil {
		return err
	}
	if err := addUint(meta, keyCount, -1); err != nil {
		return err
	}
	if ab := tx.Bucket(bucketAgents).Bucket([]byte(c.AgentID)); ab != nil && getUint(counts, []byte(c.AgentID)) == 0 {
		if err := tx.Bucket(bucketAgents).DeleteBucket([]byte(c.AgentID)); err != nil {
			return err
		}
	}
	return addUint(meta, keyBytes, -c.Bytes)
}

// evict deletes the least recently updated conversation of order (the
// recency bucket, or an agent's) that has no turn running and is not
// except; false when there is none.
func (s *Store) evict(tx *bolt.Tx, order *bolt.Bucket, except string, now time.Time) (bool, error) {
	if order == nil {
		return false, nil
	}
	cur := order.Cursor()
	for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
		id := idOfKey(k)
		if id == except || s.busy(id, now) {
			continue
		}
		c, ok, err := getInfo(tx, id)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		return true, remove(tx, c)
	}
	return false, nil
}

// expire deletes conversations idle past IdleTTL, oldest first, at most
// maxExpirePerCreate of them.
func (s *Store) expire(tx *bolt.Tx, now time.Time) error {
	if s.limits.IdleTTL >= time.Duration(1<<63-1) {
		return nil
	}
	cutoff := orderKey(now.Add(-s.limits.IdleTTL), "")
	var stale []string
	cur := tx.Bucket(bucketRecency).Cursor()
	for k, _ := cur.First(); k != nil && bytes.Compare(k, cutoff) < 0 && len(stale) < maxExpirePerCreate; k, _ = cur.Next() {
		if id := idOfKey(k); !s.busy(id, now) {
			stale = append(stale, id)
		}
	}
	for _, id := range stale {
		c, ok, err := getInfo(tx, id)
		if err != nil {
			return err
		}
		if ok {
			if err := remove(tx, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// Create implements [conversation.Store.Create].
func (s *Store) Create(ctx context.Context, c conversation.Info) error {
	if !conversation.ValidID(c.ID) {
		return fmt.Errorf("%w: %q", conversation.ErrInvalidID, c.ID)
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		now := time.Now()
		if err := s.expire(tx, now); err != nil {
			return err
		}
		if old, ok, err := getInfo(tx, c.ID); err != nil {
			return err
		} else if ok {
			if !s.expired(old, now) {
				return fmt.Errorf("%w: %q", conversation.ErrExists, c.ID)
			}
			// Past idle_ttl, invisible already, beyond what expire took.
			if err := remove(tx, old); err != nil {
				return err
			}
		}
		counts, meta := tx.Bucket(bucketCounts), tx.Bucket(bucketMeta)
		if n := getUint(counts, []byte(c.AgentID)); n >= int64(s.limits.MaxPerAgent) {
			ok, err := s.evict(tx, tx.Bucket(bucketAgents).Bucket([]byte(c.AgentID)), "", now)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%w: agent %s has %d conversations (max_per_agent), each with a turn running", conversation.ErrFull, c.AgentID, n)
			}
		}
		if n := getUint(meta, keyCount); n >= int64(s.limits.MaxConversations) {
			ok, err := s.evict(tx, tx.Bucket(bucketRecency), "", now)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%w: %d conversations (max_conversations), each with a turn running", conversation.ErrFull, n)
			}
		}
		if c.Created.IsZero() {
			c.Created = now
		}
		c.Created = c.Created.Round(0) // no monotonic reading: it would not survive the file
		c.Updated, c.Messages, c.Bytes = c.Created, 0, 0
		if err := putInfo(tx, c); err != nil {
			return err
		}
		if err := index(tx, c); err != nil {
			return err
		}
		if err := addUint(counts, []byte(c.AgentID), 1); err != nil {
			return err
		}
		return addUint(meta, keyCount, 1)
	})
}

// Get implements [conversation.Store.Get].
func (s *Store) Get(ctx context.Context, id string) (conversation.Info, error) {
	var c conversation.Info
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		c, err = s.live(tx, id, time.Now())
		return err
	})
	return c, err
}

// live is id's Info, or ErrNotFound when it is missing or idle past the
// ttl.
func (s *Store) live(tx *bolt.Tx, id string, now time.Time) (conversation.Info, error) {
	c, ok, err := getInfo(tx, id)
	if err != nil {
		return c, err
	}
	if !ok || s.expired(c, now) {
		return conversation.Info{}, fmt.Errorf("%w: %q", conversation.ErrNotFound, id)
	}
	return c, nil
}

// Messages implements [conversation.Store.Messages].
func (s *Store) Messages(ctx context.Context, id string, from, limit int) ([]conversation.Message, error) {
	var out []conversation.Message
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c, err := s.live(tx, id, time.Now())
		if err != nil {
			return err
		}
		from = min(max(from, 0), c.Messages)
		n := c.Messages - from
		if limit > 0 && limit < n {
			n = limit
		}
		b := tx.Bucket(bucketMsgs).Bucket([]byte(id))
		if b == nil || n == 0 {
			return nil
		}
		out = make([]conversation.Message, 0, n)
		cur := b.Cursor()
		for k, v := cur.Seek(seqKey(from)); k != nil && len(out) < n; k, v = cur.Next() {
			m, err := decodeMessage(v)
			if err != nil {
				return fmt.Errorf("conversation %s: message %d unreadable: %w", id, binary.BigEndian.Uint64(k), err)
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Append implements [conversation.Store.Append].
//
// Appends that arrive while another one is being committed are committed
// together in the next transaction (one fsync for all of them, each call
// returning once its turn is on disk): 16 conversations written at once
// cost about one commit per round instead of 16.
func (s *Store) Append(ctx context.Context, id string, msgs []conversation.Message) error {
	// Encoded before the transaction: bbolt runs one writer at a time,
	// and the encoding of a turn need not hold the others up.
	a := &appendOp{id: id, encoded: make([][]byte, len(msgs)), done: make(chan appendResult, 1)}
	for i, m := range msgs {
		a.encoded[i] = encodeMessage(m)
		a.size += int64(conversation.Size(m))
	}
	if s.shared {
		return s.update(ctx, func(tx *bolt.Tx) error { return s.apply(tx, a) })
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	s.gmu.Lock()
	s.pending = append(s.pending, a)
	lead := !s.leading
	s.leading = true
	s.gmu.Unlock()
	if lead {
		s.commitPending()
	}
	for {
		r := <-a.done
		if !r.lead {
			return r.err
		}
		s.commitPending()
	}
}

// appendOp is one Append waiting for its commit. The queue holds one per
// Append call in progress, which the Engine bounds by its runs in flight
// (one Append each, at the turn's end).
type appendOp struct {
	id      string
	encoded [][]byte
	size    int64
	done    chan appendResult
}

// appendResult is an Append's outcome, or (lead) its turn to commit
// the ones that queued meanwhile.
type appendResult struct {
	err  error
	lead bool
}

// errRetryAlone rolls back a group commit one of whose appends failed;
// each is then committed alone, so that one's error is its own.
var errRetryAlone = errors.New("retry each append alone")

// commitPending commits every queued append in one transaction, then
// hands the commit of those that queued meanwhile to the first of them:
// a caller commits once for the others, never for ever.
func (s *Store) commitPending() {
	// Let the writers that are ready to queue do so first: a lone
	// writer loses nothing (there is nobody to run), sixteen at once
	// share one commit instead of the first committing alone.
	runtime.Gosched()
	s.gmu.Lock()
	batch := s.pending
	s.pending = nil
	s.gmu.Unlock()
	results := make([]error, len(batch))
	err := s.db.Update(func(tx *bolt.Tx) error {
		for i, a := range batch {
			if results[i] = s.apply(tx, a); results[i] != nil {
				return errRetryAlone
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errRetryAlone):
		for i, a := range batch {
			results[i] = txErr(s.db.Update(func(tx *bolt.Tx) error { return s.apply(tx, a) }))
		}
	default:
		for i := range results {
			results[i] = txErr(err)
		}
	}
	for i, a := range batch {
		a.done <- appendResult{err: results[i]}
	}
	s.gmu.Lock()
	defer s.gmu.Unlock()
	if len(s.pending) == 0 {
		s.leading = false
		return
	}
	s.pending[0].done <- appendResult{lead: true}
}

// apply is one append in tx.
func (s *Store) apply(tx *bolt.Tx, a *appendOp) error {
	id, encoded, size := a.id, a.encoded, a.size
	now := time.Now()
	c, err := s.live(tx, id, now)
	if err != nil {
		return err
	}
	if err := conversation.CheckAppend(s.limits, c, len(encoded), size); err != nil {
		return err
	}
	meta := tx.Bucket(bucketMeta)
	for total := getUint(meta, keyBytes); total+size > s.limits.MaxTotalBytes; total = getUint(meta, keyBytes) {
		ok, err := s.evict(tx, tx.Bucket(bucketRecency), id, now)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: the store holds %d bytes (max_total_bytes %d) and no other conversation can be evicted", conversation.ErrFull, total, s.limits.MaxTotalBytes)
		}
	}
	b, err := tx.Bucket(bucketMsgs).CreateBucketIfNotExists([]byte(id))
	if err != nil {
		return err
	}
	// Appended in key order: bbolt fills pages to the brim.
	b.FillPercent = 1
	for i, v := range encoded {
		if err := b.Put(seqKey(c.Messages+i), v); err != nil {
			return err
		}
	}
	if err := unindex(tx, c); err != nil {
		return err
	}
	// Updated never goes back (a clock stepped back would reorder
	// the list and fail the cursor).
	if now.After(c.Updated) {
		c.Updated = now.Round(0)
	}
	c.Messages += len(encoded)
	c.Bytes += size
	if err := putInfo(tx, c); err != nil {
		return err
	}
	if err := index(tx, c); err != nil {
		return err
	}
	return addUint(meta, keyBytes, size)
}

// List implements [conversation.Store.List].
func (s *Store) List(ctx context.Context, q conversation.Query) (conversation.Page, error) {
	after, err := conversation.ParseCursor(q.Cursor)
	if err != nil {
		return conversation.Page{}, err
	}
	limit := conversation.PageLimit(q.Limit)
	var p conversation.Page
	err = s.view(ctx, func(tx *bolt.Tx) error {
		order := tx.Bucket(bucketRecency)
		if q.AgentID != "" {
			if order = tx.Bucket(bucketAgents).Bucket([]byte(q.AgentID)); order == nil {
				return nil
			}
		}
		now := time.Now()
		cur := order.Cursor()
		var k []byte
		if q.Cursor == "" {
			k, _ = cur.Last()
		} else {
			// The first key after the cursor's position, newest first:
			// the one before it in byte order.
			if k, _ = cur.Seek(orderKey(after.Updated, after.ID)); k == nil {
				k, _ = cur.Last()
			} else {
				k, _ = cur.Prev()
			}
		}
		for ; k != nil; k, _ = cur.Prev() {
			c, ok, err := getInfo(tx, idOfKey(k))
			if err != nil {
				return err
			}
			if !ok || s.expired(c, now) {
				continue
			}
			if len(p.Conversations) == limit {
				p.Next = conversation.CursorOf(p.Conversations[limit-1])
				break
			}
			p.Conversations = append(p.Conversations, c)
		}
		return nil
	})
	return p, err
}

// Delete implements [conversation.Store.Delete].
func (s *Store) Delete(ctx context.Context, id string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		c, err := s.live(tx, id, time.Now())
		if err != nil {
			return err
		}
		return remove(tx, c)
	})
}

// Lock implements [conversation.Store.Lock]. The lease is this process's
// (see the package documentation).
func (s *Store) Lock(ctx context.Context, id string, ttl time.Duration) (func(), error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	now := time.Now()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, conversation.ErrClosed
	}
	if l, ok := s.leases[id]; ok && now.Before(l.until) {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", conversation.ErrBusy, id)
	}
	s.seq++
	mine := lease{seq: s.seq, until: now.Add(ttl)}
	s.leases[id] = mine
	s.mu.Unlock()
	release := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if l, ok := s.leases[id]; ok && l.seq == mine.seq {
			delete(s.leases, id)
		}
	}
	// The lease is taken before the conversation is looked up: an
	// eviction that runs meanwhile sees it busy, one that ran before
	// leaves it not found.
	if _, err := s.Get(ctx, id); err != nil {
		release()
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(release) }, nil
}

// Compact rewrites the store at path, which no process may hold open,
// keeping only live data: the file shrinks to what the conversations use,
// and no deleted text stays in it. It writes path+".compact" and renames
// it over path.
func Compact(path string) error {
	src, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Millisecond, ReadOnly: true})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return fmt.Errorf("conversations: compact %s: %w", path, ErrInUse)
	}
	if err != nil {
		return fmt.Errorf("conversations: compact %s: %w", path, err)
	}
	tmp := path + ".compact"
	_ = os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: time.Millisecond})
	if err != nil {
		src.Close()
		return fmt.Errorf("conversations: compact %s: %w", path, err)
	}
	err = bolt.Compact(dst, src, 64<<20)
	err = errors.Join(err, dst.Close(), src.Close())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("conversations: compact %s: %w", path, err)
	}
	return nil
}
