package axocoatl

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// runClock is the context of one run: it is cancelled when the agent's
// timeout has been spent, counting only time when no gate has paused it
// (see [PauseRunClock]). It wraps the run's cancel context, so contexts
// derived from it are cancelled through the standard library's own
// propagation (no goroutine per child).
type runClock struct {
	context.Context // a context.WithCancelCause of the caller's ctx
	cancel          context.CancelCauseFunc

	mu      sync.Mutex
	timer   *time.Timer
	started time.Time     // when the clock last started running
	left    time.Duration // time left when it last started
	paused  int           // gates waiting now; the clock runs at zero
	fired   bool
}

type runClockKey struct{}

// errRunTimeout is the cause a run's context ends with when its timeout is
// spent.
var errRunTimeout = context.DeadlineExceeded

// newRunClock returns the run's context, cancelled at the first of: parent
// done, timeout spent (not counting paused time), cancel called.
func newRunClock(parent context.Context, timeout time.Duration) (*runClock, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	c := &runClock{Context: ctx, cancel: cancel, started: time.Now(), left: timeout}
	c.timer = time.AfterFunc(timeout, c.expire)
	return c, func() {
		c.mu.Lock()
		c.timer.Stop()
		c.mu.Unlock()
		cancel(context.Canceled)
	}
}

func (c *runClock) expire() {
	c.mu.Lock()
	if c.paused > 0 || c.fired {
		// Paused after the timer had fired but before this ran: the
		// resume re-arms it with what was left.
		c.mu.Unlock()
		return
	}
	c.fired = true
	c.mu.Unlock()
	c.cancel(errRunTimeout)
}

// Err reports context.DeadlineExceeded when the run's timeout was spent,
// as a context with a deadline would.
func (c *runClock) Err() error {
	err := c.Context.Err()
	if err != nil && errors.Is(context.Cause(c.Context), errRunTimeout) {
		return context.DeadlineExceeded
	}
	return err
}

// Deadline reports the caller's deadline only: the run's own end moves
// while the clock is paused.
func (c *runClock) Deadline() (time.Time, bool) { return c.Context.Deadline() }

func (c *runClock) Value(key any) any {
	if key == (runClockKey{}) {
		return c
	}
	return c.Context.Value(key)
}

func (c *runClock) pause() (resume func()) {
	c.mu.Lock()
	if c.paused == 0 && !c.fired {
		c.timer.Stop()
		c.left -= time.Since(c.started)
	}
	c.paused++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.paused--
			if c.paused == 0 && !c.fired {
				c.started = time.Now()
				c.timer.Reset(max(c.left, 0))
			}
		})
	}
}

// PauseRunClock stops the clock of the agent's timeout for the run ctx
// belongs to, until resume is called: time a gate spends waiting for a
// human does not count against the agent's timeout. Pauses nest (several
// calls of one run may wait at once; the clock runs again when all have
// resumed); resume may be called more than once. Outside a run (a tool
// called through [Engine.CallTool]) it does nothing. Deadlines of the
// caller's own ctx (a door's) are not paused.
func PauseRunClock(ctx context.Context) (resume func()) {
	c, ok := ctx.Value(runClockKey{}).(*runClock)
	if !ok {
		return func() {}
	}
	return c.pause()
}

// UserPrompt is a question a gate puts to the user behind a door: a yes/no
// on a tool call (Approval set) or a form an MCP server asks our user to
// fill (Schema set).
type UserPrompt struct {
	// Message says what is asked, in plain words.
	Message string
	// Approval describes the tool call waiting for a verdict when the
	// prompt is an approval; nil otherwise. A door that speaks a protocol
	// with its own shape for this (A2A input-required) renders it from here.
	Approval *PromptedApproval
	// Schema is a question's requested schema: a JSON object schema whose
	// properties are flat primitives (string, number, integer, boolean,
	// enum), as MCP form elicitation allows. Nil for a yes/no approval.
	Schema json.RawMessage
	// Check, set on a question, checks an answer's content against Schema
	// exactly as the asker will (types, bounds, formats, allowed values,
	// required and unknown properties) and returns it with the schema's
	// defaults filled in; its error says which property and why, never the
	// value. A door calls it before it takes an answer, so that a bad one
	// is refused to the user who gave it, who can answer again, instead of
	// being dropped. Nil for an approval.
	Check func(content map[string]any) (map[string]any, error)
}

// PromptedApproval is the tool call a [UserPrompt] asks about.
type PromptedApproval struct {
	ID      string // the approval's id, as the approvals API names it
	AgentID string
	TaskID  string
	Tool    string
	Server  string // the MCP server or remote agent behind the tool, if any
	// Arguments is the call's arguments as JSON, cut to the approval
	// module's preview bound (ArgumentsTruncated says so).
	Arguments          string
	ArgumentsTruncated bool
	ExpiresAt          time.Time
}

// UserAnswer is the user's answer to a [UserPrompt].
type UserAnswer struct {
	// Accepted is true when the user said yes (for a question: submitted
	// the form); declining and cancelling are both false.
	Accepted bool
	// Remember is "always" when the user asked the gate to remember an
	// approval's verdict for this agent and tool; "" or "once" otherwise.
	Remember string
	// Content holds a question's answers by property name when Accepted.
	Content map[string]any
	// By names who answered and how, for the audit trail
	// (e.g. "mcp_elicitation").
	By string
}

// UserPrompter is a door's own way to ask its user a yes/no question (the
// MCP server door uses form elicitation). A door that has one attaches it to
// the ctx of [Engine.ExecuteRequest] with [WithUserPrompter]; a gate finds it
// with [UserPrompterFrom].
type UserPrompter interface {
	// PromptUser asks and waits for the answer. An error means there is no
	// answer (the client cannot ask, failed, or ctx ended).
	PromptUser(ctx context.Context, p UserPrompt) (UserAnswer, error)
}

// UserPrompterFunc adapts a func to [UserPrompter].
type UserPrompterFunc func(ctx context.Context, p UserPrompt) (UserAnswer, error)

// PromptUser calls f.
func (f UserPrompterFunc) PromptUser(ctx context.Context, p UserPrompt) (UserAnswer, error) {
	return f(ctx, p)
}

type userPrompterKey struct{}

// WithUserPrompter returns ctx carrying p, for the gates of the runs started
// with it.
func WithUserPrompter(ctx context.Context, p UserPrompter) context.Context {
	return context.WithValue(ctx, userPrompterKey{}, p)
}

// UserPrompterFrom returns the [UserPrompter] a door attached to ctx, or nil.
func UserPrompterFrom(ctx context.Context) UserPrompter {
	p, _ := ctx.Value(userPrompterKey{}).(UserPrompter)
	return p
}
