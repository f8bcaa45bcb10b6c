package axocoatl

import (
	"context"
	"encoding/json"
	"errors"
)

// Question is what a tool source asks the user while one of its tools
// runs: an MCP server's form elicitation (2025-11-25 elicitation/create, or
// an input request of a 2026-07-28 InputRequiredResult). The tool source
// puts it with [Engine.AskQuestion]; a gate-like module that can reach a
// human answers it ([Engine.SetQuestioner]).
type Question struct {
	// Server names the tool source that asks (the MCP server's name).
	Server string
	// Tool is the qualified name of the call the question arose in, and
	// AgentID and TaskID that call's; all three are empty when the source
	// cannot tell which of its calls asks (see mcpclient's docs).
	Tool    string
	AgentID string
	TaskID  string
	// Message is the server's text, shown as it is.
	Message string
	// Schema is the requested schema: a JSON object schema of flat
	// primitive properties (see [UserPrompt].Schema).
	Schema json.RawMessage
}

// Questioner answers [Question]s. The ctx of AskQuestion is the tool call's
// when the source could tell which call asks: it carries the run's clock
// ([PauseRunClock]) and the door's [UserPrompter], and its end withdraws
// the question.
type Questioner interface {
	// AskQuestion waits for the user's answer. A decline (or a timeout)
	// is an answer with Accepted false; an error means nobody could be
	// asked or ctx ended.
	AskQuestion(ctx context.Context, q Question) (UserAnswer, error)
}

// ErrNoQuestioner: [Engine.AskQuestion] found no [Questioner] (no approval
// module, or it stopped): nobody can answer the question.
var ErrNoQuestioner = errors.New("nobody to ask: no questioner on the engine (the approval module answers questions)")

type questionerEntry struct{ q Questioner }

// SetQuestioner makes q the Engine's answerer of tool sources' questions
// (the approval module sets itself on Start). The returned func removes it
// if it is still the one set. A later call replaces an earlier one.
//
// Why a seam in the root: a tool source (mcpclient) must not import the
// module that can reach a human (approval): modules depend on the root
// only, so the root carries the one call between them.
func (e *Engine) SetQuestioner(q Questioner) (remove func()) {
	entry := &questionerEntry{q: q}
	e.questioner.Store(entry)
	return func() { e.questioner.CompareAndSwap(entry, nil) }
}

// AskQuestion puts q to the Engine's [Questioner] and waits for its answer;
// [ErrNoQuestioner] when there is none.
func (e *Engine) AskQuestion(ctx context.Context, q Question) (UserAnswer, error) {
	entry := e.questioner.Load()
	if entry == nil {
		return UserAnswer{}, ErrNoQuestioner
	}
	return entry.q.AskQuestion(ctx, q)
}
