package a2a

import (
	"context"
	"errors"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"

	"github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/internal/a2awire"
)

// A standard A2A contextId is a conversation of the Engine (the
// conversation package): each task is one turn of it, and the model is
// sent the turns before. The task store keeps tasks (for GetTask and
// ListTasks); the Engine's conversation store keeps what was said. A task's
// contextId is always its conversation's id, and a task exists in the store
// only for a turn that began (a turn refused before it ran is answered as
// an error and not kept).
//
// The rules, from A2A 1.0 §3.4 (0.3 says nothing else):
//   - no contextId: a new conversation, its id minted here and carried by
//     the task from its first event on;
//   - a contextId not in the store: a new conversation of that id (§3.4.1:
//     agents MAY accept and preserve a client's contextId); one that is no
//     conversation id ([conversation.ValidID]) is refused with -32602, and
//     none is made up in its place (§3.4.1: MUST reject, MUST NOT generate);
//   - a known contextId continues that conversation with its agent; another
//     agent named for it (receiver_id, the per-agent URL) is -32602;
//   - a taskId: the task must exist (-32001), belong to the contextId if
//     one is given (§3.4.3: reject a mismatch; -32602), and be
//     input-required: the message answers what its run asks (input.go);
//     -32004 when it has finished (§3.1.1) or is working;
//   - a message while a turn of the context runs: -32004, the A2A error of
//     the FAILED_PRECONDITION class (the state of the context forbids it
//     now), which the REST binding answers with HTTP 400. Turns are refused,
//     never queued; the error names the running task, which the client may
//     follow (SubscribeToTask) and then send again.

// defaultLookupTimeout bounds a look-up in the conversation store while a
// message is taken in (a shared store is on the network): beyond it the
// message is refused with -32603.
const defaultLookupTimeout = 10 * time.Second

// continueTask checks a message naming taskId: the task's context is
// taken from the task when contextID is empty (§3.4.3). It returns the
// task when it is input-required (the message answers it); otherwise the
// message is refused, with the error A2A gives for the reason.
func (h *Handler) continueTask(ctx context.Context, taskID, contextID, pathAgent string) (*task, *rpcError) {
	prev := h.store.get(a2a03.TaskID(taskID))
	if prev == nil || (pathAgent != "" && prev.agentID != pathAgent) || !axocoatl.IdentityFrom(ctx).SeesAgent(prev.agentID) {
		if contextID != "" {
			return nil, rpcErr(a2awire.CodeTaskNotFound, "task %q in context %q", cut(taskID, 64), cut(contextID, 64))
		}
		return nil, rpcErr(a2awire.CodeTaskNotFound, "task %q", cut(taskID, 64))
	}
	if contextID != "" && contextID != prev.contextID {
		return nil, rpcErr(a2awire.CodeInvalidParams, "taskId %s belongs to context %s, not %q: send the task's contextId, or omit taskId to add a turn to context %q",
			prev.id, prev.contextID, cut(contextID, 64), cut(contextID, 64))
	}
	switch st := prev.view().state; {
	case st.Terminal():
		return nil, rpcErr(a2awire.CodeUnsupportedOperation, "task %s is %s and takes no more messages: omit taskId and send contextId %s to continue the conversation", prev.id, st, prev.contextID)
	case st == a2a03.TaskStateInputRequired:
		return prev, nil
	}
	return nil, rpcErr(a2awire.CodeUnsupportedOperation, "task %s is working and asks for no input now (send the next turn to contextId %s once it has ended)", prev.id, prev.contextID)
}

// conversationOf checks a message's contextId and returns its conversation,
// nil when there is none yet (no contextId, or an unknown one: the run
// starts it).
func (h *Handler) conversationOf(contextID string) (*conversation.Info, *rpcError) {
	if contextID == "" {
		return nil, nil
	}
	if !conversation.ValidID(contextID) {
		return nil, rpcErr(a2awire.CodeInvalidParams, "contextId %q is not a conversation id: 1 to %d of [A-Za-z0-9._:-], starting with a letter or digit (%q is reserved); omit contextId to start a new conversation",
			cut(contextID, 64), conversation.MaxIDLength, conversation.New)
	}
	ctx, cancel := context.WithTimeout(h.ctx, h.lookupTimeout)
	defer cancel()
	info, err := h.eng.Conversations().Get(ctx, contextID)
	switch {
	case errors.Is(err, conversation.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, rpcErr(a2awire.CodeInternalError, "contextId %s: reading the conversation: %v", contextID, err)
	}
	return &info, nil
}

// isConversationRefusal reports whether err is the Engine refusing a turn
// of a conversation before it ran.
func isConversationRefusal(err error) bool {
	for _, e := range []error{conversation.ErrBusy, conversation.ErrFull, conversation.ErrOtherAgent, conversation.ErrInvalidID, conversation.ErrNotFound} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// conversationError is the A2A error of a conversation error.
func conversationError(err error) *rpcError {
	switch {
	case errors.Is(err, conversation.ErrBusy):
		return rpcErr(a2awire.CodeUnsupportedOperation, "%v: a turn of this context is running (through another door or daemon); send again when it has ended", err)
	case errors.Is(err, conversation.ErrFull):
		return rpcErr(a2awire.CodeUnsupportedOperation, "%v", err)
	case errors.Is(err, conversation.ErrOtherAgent), errors.Is(err, conversation.ErrInvalidID), errors.Is(err, conversation.ErrNotFound):
		return rpcErr(a2awire.CodeInvalidParams, "%v", err)
	}
	return rpcErr(a2awire.CodeInternalError, "%v", err)
}

// busyError refuses a message to a context whose turn, task running, has
// not ended.
func busyError(contextID string, running *task) *rpcError {
	if st := running.view().state; st == a2a03.TaskStateInputRequired {
		return rpcErr(a2awire.CodeUnsupportedOperation, "%v: context %s has a turn waiting for input (task %s, %s): answer it with a message carrying taskId %s, or send again when it has ended",
			conversation.ErrBusy, contextID, running.id, st, running.id)
	}
	return rpcErr(a2awire.CodeUnsupportedOperation, "%v: context %s has a turn running (task %s, %s); turns of a context never overlap: send again when it has ended",
		conversation.ErrBusy, contextID, running.id, running.view().state)
}

// otherAgentError refuses a known contextId for an agent it is not a
// conversation of. It does not say whose it is.
func otherAgentError(contextID, agentID string) *rpcError {
	return rpcErr(a2awire.CodeInvalidParams, "contextId %s is a conversation of another agent, not of %s: omit contextId to start a new conversation", contextID, agentID)
}
