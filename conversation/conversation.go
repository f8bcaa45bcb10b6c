// Package conversation keeps agents' conversations: what a [Store] holds
// ([Info] and ordered [Message] values), the bounds every store enforces
// ([Limits]), and the window of earlier turns a model is sent ([Window]).
//
// A conversation belongs to one agent. The Engine of the root package
// (see its Request.ConversationID) loads a conversation's history before a
// turn, windows it to the agent's max_history_bytes, runs the turn and
// appends the user's message and what the run added (also when the run
// failed) as one [Store.Append]. Two turns of one conversation never run at
// once: a turn holds the conversation's lease ([Store.Lock]) and a second
// one is refused with [ErrBusy].
//
// Three stores implement the interface: [NewMemory] here (nothing on
// disk), conversation/boltstore (bbolt in the data dir: the daemon's
// default) and conversation/natskv (NATS JetStream KV: shared by a
// cluster). conversation/storetest is the suite every store passes.
package conversation

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axocoatl/axocoatl-go/agent"
)

// Errors of a [Store]; check them with errors.Is.
var (
	// ErrNotFound: no conversation of that id (never created, deleted, or
	// evicted by a bound).
	ErrNotFound = errors.New("conversation not found")
	// ErrExists: Create with an id already in use.
	ErrExists = errors.New("conversation already exists")
	// ErrBusy: another turn of the conversation is running (its lease is
	// held); retry when it has ended.
	ErrBusy = errors.New("conversation busy: another turn of it is running")
	// ErrFull: the conversation holds Limits.MaxMessages messages or
	// Limits.MaxBytes bytes; the turn is not recorded. Start a new one.
	ErrFull = errors.New("conversation full")
	// ErrOtherAgent: the conversation belongs to another agent.
	ErrOtherAgent = errors.New("conversation belongs to another agent")
	// ErrInvalidID: an id that is not [ValidID].
	ErrInvalidID = errors.New("invalid conversation id")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("conversation store closed")
)

// New is the conversation id a door passes to start a conversation whose
// id the Engine chooses ([NewID]).
const New = "new"

// Info describes a conversation, without its messages.
type Info struct {
	ID      string `json:"id"`
	AgentID string `json:"agent_id"`
	// Title is the conversation's first user line, cut ([Title]).
	Title string `json:"title"`
	// Source is the door the conversation started on ("api", "a2a",
	// "mcp", "library").
	Source  string    `json:"source"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Messages and Bytes are what the conversation holds ([Size] summed).
	Messages int   `json:"messages"`
	Bytes    int64 `json:"bytes"`
}

// Message is one message of a conversation: a user turn, an assistant turn
// (with the tool calls it asked for), or a tool result.
type Message struct {
	Role      agent.Role       `json:"role"`
	Content   string           `json:"content,omitempty"`
	ToolCalls []agent.ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and IsError are set on a tool result.
	ToolCallID string `json:"tool_call_id,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
	// TaskID is the task (the run) that added the message.
	TaskID string    `json:"task_id,omitempty"`
	At     time.Time `json:"at"`
}

// AgentMessage is m as a model sees it.
func (m Message) AgentMessage() agent.Message {
	return agent.Message{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, IsError: m.IsError}
}

// FromAgent is the conversation form of a run's message.
func FromAgent(m agent.Message, taskID string, at time.Time) Message {
	return Message{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, IsError: m.IsError, TaskID: taskID, At: at}
}

// Size is what m counts for against Limits.MaxBytes and a window: its
// text, its tool calls' names, ids and arguments, and a fixed 32 bytes of
// framing.
func Size(m Message) int {
	n := 32 + len(m.Content) + len(m.ToolCallID)
	for _, c := range m.ToolCalls {
		n += 16 + len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	return n
}

// Query selects conversations for [Store.List].
type Query struct {
	// AgentID: only that agent's; zero: every agent's.
	AgentID string
	// Limit: at most so many; zero or more than MaxPage: MaxPage.
	Limit int
	// Cursor: the page after the one that returned it; zero: the first.
	Cursor string
}

// MaxPage bounds a page of [Store.List].
const MaxPage = 200

// Page is one page of [Store.List], newest first (by Updated).
type Page struct {
	Conversations []Info `json:"conversations"`
	// Next is the cursor of the next page; "" on the last one.
	Next string `json:"next,omitempty"`
}

// Store keeps conversations. Every method honours ctx and is safe for
// concurrent use.
type Store interface {
	// Create records a new, empty conversation (c.ID, c.AgentID, c.Title,
	// c.Source, c.Created; Updated is set to Created). ErrExists when the
	// id is taken, ErrInvalidID when it is not ValidID. When Limits'
	// conversation counts are reached, the least recently updated
	// conversation without a running turn (of the agent, or in all) is
	// deleted to make room.
	Create(ctx context.Context, c Info) error
	// Get returns a conversation's Info; ErrNotFound.
	Get(ctx context.Context, id string) (Info, error)
	// Messages returns the conversation's messages from index from (0:
	// the first), at most limit of them (zero or negative: all), oldest
	// first; ErrNotFound.
	Messages(ctx context.Context, id string, from, limit int) ([]Message, error)
	// Append adds msgs at the end of the conversation at once (all or
	// none) and sets Updated to now; ErrNotFound, ErrFull (MaxMessages,
	// MaxBytes). When Limits.MaxTotalBytes is reached, the least recently
	// updated other conversations without a running turn are deleted.
	Append(ctx context.Context, id string, msgs []Message) error
	// List pages through conversations, newest (Updated) first.
	List(ctx context.Context, q Query) (Page, error)
	// Delete removes a conversation and its messages for good;
	// ErrNotFound.
	Delete(ctx context.Context, id string) error
	// Lock takes the conversation's turn lease: ErrBusy when it is held,
	// ErrNotFound. The lease ends with release, or after ttl if release is
	// never called (a process that died mid-turn). release is idempotent.
	Lock(ctx context.Context, id string, ttl time.Duration) (release func(), err error)
	// Limits are the bounds the store enforces, defaults applied.
	Limits() Limits
	// Close releases the store's resources; later calls fail with
	// ErrClosed.
	Close() error
}

// Limits bound a store. The zero value of each field means its default;
// a negative one no bound. Every Store implementation enforces them.
type Limits struct {
	// MaxConversations in all; reaching it evicts the least recently
	// updated idle conversation. Zero: 100,000.
	MaxConversations int `yaml:"max_conversations" json:"max_conversations,omitempty"`
	// MaxPerAgent: conversations of one agent; reaching it evicts that
	// agent's least recently updated idle one. Zero: 10,000.
	MaxPerAgent int `yaml:"max_per_agent" json:"max_per_agent,omitempty"`
	// MaxMessages of one conversation; a turn that would pass it is
	// refused with ErrFull. Zero: 10,000.
	MaxMessages int `yaml:"max_messages" json:"max_messages,omitempty"`
	// MaxBytes of one conversation ([Size] summed); a turn that would pass
	// it is refused with ErrFull. Zero: 8 MiB.
	MaxBytes int64 `yaml:"max_bytes" json:"max_bytes,omitempty"`
	// MaxTotalBytes of every conversation together; reaching it evicts
	// the least recently updated idle conversations. Zero: 1 GiB.
	MaxTotalBytes int64 `yaml:"max_total_bytes" json:"max_total_bytes,omitempty"`
	// IdleTTL: a conversation not updated for so long is deleted. Zero:
	// 30 days.
	IdleTTL time.Duration `yaml:"idle_ttl" json:"idle_ttl,omitempty"`
}

// Defaults of [Limits].
const (
	DefaultMaxConversations = 100_000
	DefaultMaxPerAgent      = 10_000
	DefaultMaxMessages      = 10_000
	DefaultMaxBytes         = 8 << 20
	DefaultMaxTotalBytes    = 1 << 30
	DefaultIdleTTL          = 30 * 24 * time.Hour
)

// WithDefaults returns l with zero fields replaced by their defaults and
// negative ones by the largest value (no bound).
func (l Limits) WithDefaults() Limits {
	l.MaxConversations = orInt(l.MaxConversations, DefaultMaxConversations)
	l.MaxPerAgent = orInt(l.MaxPerAgent, DefaultMaxPerAgent)
	l.MaxMessages = orInt(l.MaxMessages, DefaultMaxMessages)
	l.MaxBytes = orInt64(l.MaxBytes, DefaultMaxBytes)
	l.MaxTotalBytes = orInt64(l.MaxTotalBytes, DefaultMaxTotalBytes)
	l.IdleTTL = time.Duration(orInt64(int64(l.IdleTTL), int64(DefaultIdleTTL)))
	return l
}

func orInt(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return int(^uint(0) >> 1)
	}
	return v
}

func orInt64(v, def int64) int64 {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 1<<63 - 1
	}
	return v
}

// MaxIDLength bounds a conversation id.
const MaxIDLength = 128

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

// ValidID reports whether id may name a conversation: 1 to 128 of
// [A-Za-z0-9._:-], starting with a letter or digit (a UUID is one; "new"
// is reserved: [New]).
func ValidID(id string) bool {
	return id != New && len(id) <= MaxIDLength && idPattern.MatchString(id)
}

// TitleMax bounds a title, in bytes.
const TitleMax = 80

// Title is a conversation's title from its first user message: the first
// non-empty line, trimmed, cut to TitleMax bytes on a UTF-8 boundary
// (with "…" when cut).
func Title(input string) string {
	for line := range strings.Lines(input) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if len(line) <= TitleMax {
			return line
		}
		cut := TitleMax - len("…")
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		return line[:cut] + "…"
	}
	return ""
}
