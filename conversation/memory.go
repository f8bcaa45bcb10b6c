package conversation

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Memory is a [Store] in the process's memory: nothing on disk, gone with
// the process. The Engine's default when its Options name no store.
type Memory struct {
	limits Limits

	mu       sync.Mutex
	closed   bool
	convs    map[string]*memConv
	recency  *list.List // of *memConv, most recently updated first
	perAgent map[string]int
	total    int64
	// seq orders leases: a release only ends the lease it took.
	seq uint64
}

type memConv struct {
	info  Info
	msgs  []Message
	elem  *list.Element
	lease uint64    // 0: free
	until time.Time // when the lease ends if never released
}

// NewMemory returns an empty in-memory store bounded by l.
func NewMemory(l Limits) *Memory {
	return &Memory{
		limits:   l.WithDefaults(),
		convs:    map[string]*memConv{},
		recency:  list.New(),
		perAgent: map[string]int{},
	}
}

var _ Store = (*Memory)(nil)

func (m *Memory) lockCtx(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// Create implements [Store.Create].
func (m *Memory) Create(ctx context.Context, c Info) error {
	if !ValidID(c.ID) {
		return fmt.Errorf("%w: %q", ErrInvalidID, c.ID)
	}
	if err := m.lockCtx(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	now := time.Now()
	m.expireLocked(now)
	if _, ok := m.convs[c.ID]; ok {
		return fmt.Errorf("%w: %q", ErrExists, c.ID)
	}
	if m.perAgent[c.AgentID] >= m.limits.MaxPerAgent {
		if !m.evictLocked(now, func(v *memConv) bool { return v.info.AgentID == c.AgentID }) {
			return fmt.Errorf("%w: agent %s has %d conversations (max_per_agent), each with a turn running", ErrFull, c.AgentID, m.perAgent[c.AgentID])
		}
	}
	if len(m.convs) >= m.limits.MaxConversations {
		if !m.evictLocked(now, func(*memConv) bool { return true }) {
			return fmt.Errorf("%w: %d conversations (max_conversations), each with a turn running", ErrFull, len(m.convs))
		}
	}
	if c.Created.IsZero() {
		c.Created = now
	}
	c.Updated, c.Messages, c.Bytes = c.Created, 0, 0
	v := &memConv{info: c}
	v.elem = m.recency.PushFront(v)
	m.convs[c.ID] = v
	m.perAgent[c.AgentID]++
	return nil
}

// evictLocked deletes the least recently updated conversation that match
// accepts and has no turn running; false when there is none.
func (m *Memory) evictLocked(now time.Time, match func(*memConv) bool) bool {
	for e := m.recency.Back(); e != nil; e = e.Prev() {
		v := e.Value.(*memConv)
		if match(v) && !v.busy(now) {
			m.deleteLocked(v)
			return true
		}
	}
	return false
}

// expireLocked deletes conversations idle for longer than IdleTTL.
func (m *Memory) expireLocked(now time.Time) {
	for e := m.recency.Back(); e != nil; {
		v := e.Value.(*memConv)
		if now.Sub(v.info.Updated) <= m.limits.IdleTTL {
			return
		}
		e = e.Prev()
		if !v.busy(now) {
			m.deleteLocked(v)
		}
	}
}

func (v *memConv) busy(now time.Time) bool { return v.lease != 0 && now.Before(v.until) }

func (m *Memory) deleteLocked(v *memConv) {
	m.recency.Remove(v.elem)
	delete(m.convs, v.info.ID)
	if m.perAgent[v.info.AgentID]--; m.perAgent[v.info.AgentID] <= 0 {
		delete(m.perAgent, v.info.AgentID)
	}
	m.total -= v.info.Bytes
}

func (m *Memory) getLocked(id string, now time.Time) (*memConv, error) {
	v, ok := m.convs[id]
	if !ok || now.Sub(v.info.Updated) > m.limits.IdleTTL && !v.busy(now) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return v, nil
}

// Get implements [Store.Get].
func (m *Memory) Get(ctx context.Context, id string) (Info, error) {
	if err := m.lockCtx(ctx); err != nil {
		return Info{}, err
	}
	defer m.mu.Unlock()
	v, err := m.getLocked(id, time.Now())
	if err != nil {
		return Info{}, err
	}
	return v.info, nil
}

// Messages implements [Store.Messages].
func (m *Memory) Messages(ctx context.Context, id string, from, limit int) ([]Message, error) {
	if err := m.lockCtx(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	v, err := m.getLocked(id, time.Now())
	if err != nil {
		return nil, err
	}
	from = min(max(from, 0), len(v.msgs))
	to := len(v.msgs)
	if limit > 0 && from+limit < to {
		to = from + limit
	}
	return slices.Clone(v.msgs[from:to]), nil
}

// Append implements [Store.Append].
func (m *Memory) Append(ctx context.Context, id string, msgs []Message) error {
	if err := m.lockCtx(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	now := time.Now()
	v, err := m.getLocked(id, now)
	if err != nil {
		return err
	}
	var size int64
	for _, msg := range msgs {
		size += int64(Size(msg))
	}
	if err := CheckAppend(m.limits, v.info, len(msgs), size); err != nil {
		return err
	}
	for m.total+size > m.limits.MaxTotalBytes {
		if !m.evictLocked(now, func(o *memConv) bool { return o != v }) {
			return fmt.Errorf("%w: the store holds %d bytes (max_total_bytes %d) and no other conversation can be evicted", ErrFull, m.total, m.limits.MaxTotalBytes)
		}
	}
	v.msgs = append(v.msgs, msgs...)
	v.info.Messages += len(msgs)
	v.info.Bytes += size
	v.info.Updated = now
	m.total += size
	m.recency.MoveToFront(v.elem)
	return nil
}

// CheckAppend is the per-conversation bound of [Store.Append]: adding n
// messages of size bytes to c must keep it within l (with defaults
// applied) or the answer is ErrFull, saying which bound. Stores share it
// so that their errors read the same.
func CheckAppend(l Limits, c Info, n int, size int64) error {
	if c.Messages+n > l.MaxMessages {
		return fmt.Errorf("%w: conversation %s holds %d messages and this turn adds %d (max_messages %d): start a new conversation", ErrFull, c.ID, c.Messages, n, l.MaxMessages)
	}
	if c.Bytes+size > l.MaxBytes {
		return fmt.Errorf("%w: conversation %s holds %d bytes and this turn adds %d (max_bytes %d): start a new conversation", ErrFull, c.ID, c.Bytes, size, l.MaxBytes)
	}
	return nil
}

// List implements [Store.List].
func (m *Memory) List(ctx context.Context, q Query) (Page, error) {
	after, err := ParseCursor(q.Cursor)
	if err != nil {
		return Page{}, err
	}
	limit := PageLimit(q.Limit)
	if err := m.lockCtx(ctx); err != nil {
		return Page{}, err
	}
	defer m.mu.Unlock()
	now := time.Now()
	var p Page
	for e := m.recency.Front(); e != nil; e = e.Next() {
		v := e.Value.(*memConv)
		if q.AgentID != "" && v.info.AgentID != q.AgentID {
			continue
		}
		if now.Sub(v.info.Updated) > m.limits.IdleTTL && !v.busy(now) {
			continue
		}
		if q.Cursor != "" && !after.Before(v.info) {
			continue
		}
		if len(p.Conversations) == limit {
			p.Next = CursorOf(p.Conversations[limit-1])
			break
		}
		p.Conversations = append(p.Conversations, v.info)
	}
	return p, nil
}

// Delete implements [Store.Delete].
func (m *Memory) Delete(ctx context.Context, id string) error {
	if err := m.lockCtx(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	v, err := m.getLocked(id, time.Now())
	if err != nil {
		return err
	}
	m.deleteLocked(v)
	return nil
}

// Lock implements [Store.Lock].
func (m *Memory) Lock(ctx context.Context, id string, ttl time.Duration) (func(), error) {
	if err := m.lockCtx(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	now := time.Now()
	v, err := m.getLocked(id, now)
	if err != nil {
		return nil, err
	}
	if v.busy(now) {
		return nil, fmt.Errorf("%w: %s", ErrBusy, id)
	}
	m.seq++
	lease := m.seq
	v.lease, v.until = lease, now.Add(ttl)
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if v.lease == lease {
				v.lease = 0
			}
		})
	}, nil
}

// Limits implements [Store.Limits].
func (m *Memory) Limits() Limits { return m.limits }

// Close implements [Store.Close].
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.convs, m.recency, m.perAgent = nil, list.New(), nil
	return nil
}

// Cursor is a position in the newest-first order of [Store.List]: the
// conversation a page ended with.
type Cursor struct {
	Updated time.Time
	ID      string
}

// Before reports whether c comes after the cursor's position in the
// newest-first order (Updated descending, then ID descending).
func (c Cursor) Before(c2 Info) bool {
	if !c2.Updated.Equal(c.Updated) {
		return c2.Updated.Before(c.Updated)
	}
	return c2.ID < c.ID
}

// CursorOf is the cursor of the page that ends with c.
func CursorOf(c Info) string {
	return strconv.FormatInt(c.Updated.UnixNano(), 10) + "." + c.ID
}

// ErrBadCursor is matched by the error of a cursor that no page returned
// (a door answers it as bad input: HTTP 400).
var ErrBadCursor = errors.New("malformed cursor")

// ParseCursor reads a cursor of [CursorOf]; "" is the first page. Its
// error wraps [ErrBadCursor].
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	ns, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || !ValidID(id) {
		return Cursor{}, fmt.Errorf("conversation: %w %q", ErrBadCursor, truncate(s, 64))
	}
	return Cursor{Updated: time.Unix(0, n), ID: id}, nil
}

// PageLimit is q.Limit bounded to (0, MaxPage].
func PageLimit(n int) int {
	if n <= 0 || n > MaxPage {
		return MaxPage
	}
	return n
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
