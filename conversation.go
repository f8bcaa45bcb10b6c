package axocoatl

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// Conversations returns the Engine's conversation store
// ([Options].Conversations), for doors that list, show and delete
// conversations.
func (e *Engine) Conversations() conversation.Store { return e.convs }

// leaseSlack is how much longer than the agent's timeout a turn holds its
// conversation's lease when it is never released (the process died): the
// run clock stops while a human approves a tool call (approval.timeout, 5
// minutes by default), so a run may last longer than its timeout.
const leaseSlack = 10 * time.Minute

// recordTimeout bounds the write of a finished turn, which happens even
// when the run's context has ended (a canceled turn is kept too).
const recordTimeout = 10 * time.Second

// turn is a conversation turn in progress: the conversation it continues,
// the history the model is sent, and the lease that keeps other turns out.
type turn struct {
	info    conversation.Info
	history []agent.Message
	omitted int
	release func()
}

// beginTurn resolves req.ConversationID for agent spec, takes the
// conversation's lease and loads its history, windowed to the agent's
// max_history_bytes. Its errors wrap conversation.ErrInvalidID, ErrNotFound
// (unless req.CreateConversation), ErrOtherAgent, ErrBusy or ErrFull.
func (e *Engine) beginTurn(ctx context.Context, spec *agent.Spec, req *Request, start time.Time) (*turn, error) {
	id := req.ConversationID
	created := false
	create := func(id string) error {
		err := e.convs.Create(ctx, conversation.Info{
			ID: id, AgentID: req.AgentID, Title: conversation.Title(req.Input), Source: string(req.Source), Created: start,
		})
		created = err == nil
		return err
	}
	switch {
	case id == conversation.New:
		id = lattice.NewID(start)
		if err := create(id); err != nil {
			return nil, err
		}
	case !conversation.ValidID(id):
		return nil, fmt.Errorf("%w: %q: 1 to %d of [A-Za-z0-9._:-], or %q to start one", conversation.ErrInvalidID, truncateID(id), conversation.MaxIDLength, conversation.New)
	}
	// Another agent's conversation is refused before it is locked: a turn
	// sent to the wrong agent must not hold it (its own turns would meet
	// ErrBusy meanwhile). The check under the lock below stays: the
	// conversation may be deleted and made anew between the two.
	if !created {
		if info, err := e.convs.Get(ctx, id); err == nil && info.AgentID != req.AgentID {
			return nil, otherAgent(id, req.AgentID)
		}
	}
	ttl := spec.Timeout + leaseSlack
	release, err := e.convs.Lock(ctx, id, ttl)
	if errors.Is(err, conversation.ErrNotFound) && req.CreateConversation {
		if err = create(id); err == nil || errors.Is(err, conversation.ErrExists) {
			release, err = e.convs.Lock(ctx, id, ttl)
		}
	}
	if err != nil {
		return nil, err
	}
	t := &turn{release: release}
	fail := func(err error) (*turn, error) {
		release()
		return nil, err
	}
	if t.info, err = e.convs.Get(ctx, id); err != nil {
		return fail(err)
	}
	if t.info.AgentID != req.AgentID {
		return fail(otherAgent(id, req.AgentID))
	}
	userSize := conversation.Size(conversation.Message{Role: agent.RoleUser, Content: req.Input})
	if err := conversation.CheckAppend(e.convs.Limits(), t.info, 2, int64(userSize)); err != nil {
		return fail(err)
	}
	if !created && t.info.Messages > 0 {
		msgs, before, err := e.historyTail(ctx, t.info, spec.MaxHistoryBytes)
		if err != nil {
			return fail(err)
		}
		t.history, t.omitted = conversation.Window(msgs, spec.MaxHistoryBytes)
		t.omitted += before
	}
	return t, nil
}

// otherAgent is the error for a turn sent to agent agentID in another
// agent's conversation. Said as not found to the caller's door would leak
// nothing more, but the agent's own id is what the caller sent: naming it
// helps.
func otherAgent(id, agentID string) error {
	return fmt.Errorf("%w: conversation %s is not agent %s's", conversation.ErrOtherAgent, id, agentID)
}

// historyTail reads the end of conversation c that the window can take
// from: all of it when it fits maxBytes, else pages from the end (64
// messages, then twice as many each time) until what was read passes
// maxBytes. Window of that tail is Window of the whole conversation, which
// a long conversation is spared reading. before is how many messages
// precede the tail.
func (e *Engine) historyTail(ctx context.Context, c conversation.Info, maxBytes int) (tail []conversation.Message, before int, err error) {
	if c.Bytes <= int64(maxBytes) {
		tail, err = e.convs.Messages(ctx, c.ID, 0, 0)
		return tail, 0, err
	}
	end, page, size := c.Messages, 64, 0
	for end > 0 && size <= maxBytes {
		from := max(end-page, 0)
		msgs, err := e.convs.Messages(ctx, c.ID, from, end-from)
		if err != nil {
			return nil, 0, err
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			size += conversation.Size(m)
		}
		tail = append(msgs, tail...)
		end, page = from, page*2
	}
	return tail, end, nil
}

// endTurn records what the turn added: the user's message, then what the
// run did (each tool call with its result), then the answer, or when the
// run failed a note saying so, so that the conversation reads on. It
// writes even when ctx has ended, and releases the lease.
func (e *Engine) endTurn(ctx context.Context, t *turn, req *Request, start time.Time, run agent.Turn, runErr error) error {
	defer t.release()
	now := time.Now()
	msgs := make([]conversation.Message, 0, 2+len(run.Messages))
	msgs = append(msgs, conversation.Message{Role: agent.RoleUser, Content: req.Input, TaskID: req.TaskID, At: start})
	for _, m := range run.Messages {
		msgs = append(msgs, conversation.FromAgent(m, req.TaskID, now))
	}
	if runErr != nil {
		msgs = append(msgs, conversation.Message{Role: agent.RoleAssistant, Content: "(this turn failed: " + runErr.Error() + ")", TaskID: req.TaskID, At: now})
	}
	cutForRecord(msgs, e.convs.Limits().MaxBytes/maxMessageShare)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := e.convs.Append(wctx, t.info.ID, msgs); err != nil {
		e.log.Warn("conversation turn not recorded", "agent", req.AgentID, "task", req.TaskID, "conversation", t.info.ID, "error", err)
		return fmt.Errorf("conversation %s: the turn ran but was not recorded: %w", t.info.ID, err)
	}
	return nil
}

// maxMessageShare: one message's text is recorded up to a this much of the
// conversation's max_bytes (1 MiB of the default 8 MiB), so that one huge
// answer or tool result neither fills the conversation nor fails a run
// that went well; the model would not be sent it whole anyway (its window
// is max_history_bytes, 256 KiB by default).
const maxMessageShare = 8

// cutForRecord cuts the text of each message longer than max bytes on a
// UTF-8 boundary, saying how much was left out.
func cutForRecord(msgs []conversation.Message, max int64) {
	for i := range msgs {
		c := msgs[i].Content
		if int64(len(c)) <= max {
			continue
		}
		cut := int(max)
		for cut > 0 && !utf8.RuneStart(c[cut]) {
			cut--
		}
		msgs[i].Content = c[:cut] + fmt.Sprintf("\n[… %d bytes of this message were left out of the conversation's record]", len(c)-cut)
	}
}

// withOmittedNote is spec with the model told, at the end of its system
// prompt, that the window left earlier messages out.
func withOmittedNote(spec agent.Spec, omitted int) agent.Spec {
	if omitted == 0 {
		return spec
	}
	note := conversation.OmittedNote(omitted)
	if spec.SystemPrompt == "" {
		spec.SystemPrompt = note
	} else {
		spec.SystemPrompt += "\n\n" + note
	}
	return spec
}

func truncateID(id string) string {
	if len(id) > 64 {
		return id[:64] + "…"
	}
	return id
}
