package a2a

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/jsonschema-go/jsonschema"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/a2awire"
	"github.com/axocoatl/axocoatl-go/internal/httpguard"
)

// Human input through A2A (docs/a2a.md, "Human input"). A run that waits for
// a human (a gated tool call, or a question an MCP server asks our user)
// asks through the door's [axocoatl.UserPrompter], which every A2A task's
// run carries: the task goes to input-required with a status message saying
// what is asked and how to answer; a blocking send, a stream and a
// subscription end there (as a2a-go's servers do: input-required is an
// interrupted state). The caller's next message with the task's id answers
// it, and the task goes back to working; an answer from elsewhere (the
// dashboard, the approvals API) withdraws the question and the task leaves
// input-required on its own. Prompts of one run queue: the task shows the
// oldest; each answer takes it.

// InputBy is the [axocoatl.UserAnswer].By of an answer given through A2A
// input-required: what the approval's audit trail records as its resolver.
const InputBy = "a2a_input"

// Errors of the prompter.
var (
	// ErrTaskEnded is the prompter's error when the task reached a terminal
	// state (canceled) before the question could be shown.
	ErrTaskEnded = errors.New("a2a: the task has ended: nobody to ask")
)

// inputPrompt is one question a run waits on.
type inputPrompt struct {
	p      axocoatl.UserPrompt
	msgID  string
	text   string         // the status message's text
	data   map[string]any // the status message's data part
	schema *jsonschema.Resolved
	answer chan axocoatl.UserAnswer // buffered 1; sent once, by take
}

// callerOf is who sent r, for "only the caller that sent a task answers
// it": the [axocoatl.Identity] the guard bound to the request ([axocoatl.IdentityFrom]) (a server.tokens name,
// "api_token", or a JWT's subject: a refreshed token of the same subject
// is the same caller), else a digest of the credential the request carried
// (a bearer token, X-API-Key or other Authorization a fronting proxy
// checked), never the credential itself; "" for a request without one.
func callerOf(r *http.Request) string {
	if r == nil {
		return ""
	}
	if id := axocoatl.IdentityFrom(r.Context()); id != nil {
		return "identity\x00" + id.Name
	}
	tok := httpguard.TokenFrom(r)
	if tok == "" {
		if a := r.Header.Get("Authorization"); a != "" {
			tok = "authorization\x00" + a // not a bearer token: the header as a whole
		}
	}
	if tok == "" {
		return ""
	}
	d := sha256.Sum256([]byte("a2a-caller\x00" + tok))
	return hex.EncodeToString(d[:16])
}

// PromptUser makes a task the door's [axocoatl.UserPrompter] (attached to
// its run with [axocoatl.WithUserPrompter]) for its own
// run: the task shows the question (input-required) until its caller
// answers, ctx ends (answered elsewhere, the gate gave up) or the task
// ends.
func (t *task) PromptUser(ctx context.Context, p axocoatl.UserPrompt) (axocoatl.UserAnswer, error) {
	if err := ctx.Err(); err != nil { // answered elsewhere already
		return axocoatl.UserAnswer{}, err
	}
	q, err := newPrompt(t, p)
	if err != nil {
		return axocoatl.UserAnswer{}, err
	}
	if !t.ask(q) {
		return axocoatl.UserAnswer{}, ErrTaskEnded
	}
	defer t.unask(q)
	select {
	case a := <-q.answer:
		return a, nil
	case <-ctx.Done():
		return axocoatl.UserAnswer{}, ctx.Err()
	}
}

// newPrompt renders p as the status message of t: an approval from its
// [axocoatl.PromptedApproval], a question from its [axocoatl.UserPrompt].Schema.
func newPrompt(t *task, p axocoatl.UserPrompt) (*inputPrompt, error) {
	q := &inputPrompt{p: p, answer: make(chan axocoatl.UserAnswer, 1)}
	switch {
	case p.Schema != nil:
		var s jsonschema.Schema
		if err := json.Unmarshal(p.Schema, &s); err != nil {
			return nil, fmt.Errorf("a2a: the question's schema: %w", err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			return nil, fmt.Errorf("a2a: the question's schema: %w", err)
		}
		var schema any
		_ = json.Unmarshal(p.Schema, &schema) // valid: decoded above
		q.schema = rs
		q.text = fmt.Sprintf("%s\nTo answer, send a message to this task (taskId %s) with a data part holding the values the schema in this message's data part asks for, or the text decline.",
			strings.TrimSpace(p.Message), t.id)
		q.data = map[string]any{"kind": "question", "message": p.Message, "schema": schema}
	case p.Approval != nil:
		a := p.Approval
		var b strings.Builder
		fmt.Fprintf(&b, "Approval needed: agent %s wants to call tool %s", a.AgentID, a.Tool)
		if a.Server != "" {
			fmt.Fprintf(&b, " (server %s)", a.Server)
		}
		fmt.Fprintf(&b, " with arguments %s", a.Arguments)
		if a.ArgumentsTruncated {
			b.WriteString(" (cut)")
		}
		fmt.Fprintf(&b, ".\nTo answer, send a message to this task (taskId %s) with the text allow or deny, or a data part {\"approval\":\"allow\"|\"deny\",\"remember\":\"once\"|\"always\"}", t.id)
		if !a.ExpiresAt.IsZero() {
			fmt.Fprintf(&b, "; unanswered by %s it is denied", a.ExpiresAt.UTC().Format(time.RFC3339))
		}
		b.WriteString(".")
		q.text = b.String()
		q.data = map[string]any{
			"kind": "approval", "approval_id": a.ID, "agent_id": a.AgentID, "tool": a.Tool, "server": a.Server,
			"arguments": a.Arguments, "arguments_truncated": a.ArgumentsTruncated,
			"answer": map[string]any{"approval": []any{"allow", "deny"}, "remember": []any{"once", "always"}},
		}
		if !a.ExpiresAt.IsZero() {
			q.data["expires_at"] = a.ExpiresAt.UTC().Format(time.RFC3339)
		}
	default:
		q.text = strings.TrimSpace(p.Message) + fmt.Sprintf("\nTo answer, send a message to this task (taskId %s) with the text allow or deny.", t.id)
		q.data = map[string]any{"kind": "approval", "message": p.Message,
			"answer": map[string]any{"approval": []any{"allow", "deny"}, "remember": []any{"once", "always"}}}
	}
	return q, nil
}

// ask shows q once the prompts before it are answered; false when the
// task has ended.
func (t *task) ask(q *inputPrompt) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state.Terminal() {
		return false
	}
	t.nPrompts++
	q.msgID = string(t.id) + "-input-" + strconv.Itoa(t.nPrompts)
	t.prompts = append(t.prompts, q)
	if len(t.prompts) == 1 {
		t.showLocked()
	}
	return true
}

// showLocked puts the task in input-required for the head prompt and wakes
// whoever waits for it.
func (t *task) showLocked() {
	t.state, t.updated = a2a03.TaskStateInputRequired, time.Now()
	close(t.asked)
	t.asked = make(chan struct{})
}

// unask withdraws q (answered, or its gate is done); the task shows the
// next prompt, or goes back to working.
func (t *task) unask(q *inputPrompt) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, p := range t.prompts {
		if p == q {
			t.prompts = append(t.prompts[:i:i], t.prompts[i+1:]...)
			t.afterTakeLocked(i == 0)
			return
		}
	}
}

func (t *task) afterTakeLocked(head bool) {
	if !head || t.state != a2a03.TaskStateInputRequired {
		return
	}
	if len(t.prompts) > 0 {
		t.showLocked()
		return
	}
	t.state, t.updated = a2a03.TaskStateWorking, time.Now()
}

// head is the prompt the task shows, nil when it shows none.
func (t *task) head() *inputPrompt {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != a2a03.TaskStateInputRequired || len(t.prompts) == 0 {
		return nil
	}
	return t.prompts[0]
}

// take answers q if the task still shows it.
func (t *task) take(q *inputPrompt, a axocoatl.UserAnswer) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != a2a03.TaskStateInputRequired || len(t.prompts) == 0 || t.prompts[0] != q {
		return false
	}
	t.prompts = t.prompts[1:]
	q.answer <- a
	t.afterTakeLocked(true)
	return true
}

// settled waits until t is terminal or input-required (an interrupted
// state: a blocking send and a stream end there), or ctx ends.
func (t *task) settled(ctx context.Context) (view, bool) {
	for {
		t.mu.Lock()
		v := t.viewLocked()
		asked := t.asked
		t.mu.Unlock()
		if v.state.Terminal() || v.state == a2a03.TaskStateInputRequired {
			return v, true
		}
		select {
		case <-t.done:
		case <-asked:
		case <-ctx.Done():
			return v, false
		}
	}
}

// runDetached runs t in its own goroutine, owned by the Handler (Close
// waits for it); the channel gets execute's result when the run has
// returned.
func (h *Handler) runDetached(ctx context.Context, t *task, onEvent func(agent.RunEvent)) <-chan *rpcError {
	done := make(chan *rpcError, 1)
	if err := h.join(); err != nil { // Close began: the run would be orphaned
		t.cancelRun()
		t.finish(a2a03.TaskStateCanceled, "", "server shutting down")
		h.store.endTurn(t)
		done <- nil
		return done
	}
	go func() {
		defer h.runs.Done()
		done <- h.execute(ctx, t, onEvent)
	}()
	return done
}

// awaitRun waits for the run of a blocking send or a stream: until it has
// returned (its error, if the turn was refused) or the task is
// input-required (asked: interrupted, with the view then).
func awaitRun(ctx context.Context, t *task, ran <-chan *rpcError) (rerr *rpcError, v view, asked bool) {
	for {
		t.mu.Lock()
		v = t.viewLocked()
		ch := t.asked
		t.mu.Unlock()
		if v.state == a2a03.TaskStateInputRequired {
			return nil, v, true
		}
		select {
		case rerr := <-ran:
			return rerr, v, false
		case <-ch:
		case <-ctx.Done():
			// The client left; the run goes on, followed by no one.
			return nil, v, false
		}
	}
}

// resume answers the prompt of the input-required task a message names
// (taskID); the other cases of a message naming a task are refused as
// before ([Handler.continueTask]).
func (h *Handler) resume(ctx context.Context, sr *sendRequest, taskID, contextID, pathAgent string) (*task, *rpcError) {
	t, rerr := h.continueTask(ctx, taskID, contextID, pathAgent)
	if rerr != nil {
		return nil, rerr
	}
	if callerOf(sr.req) != t.caller {
		return nil, rpcErr(a2awire.CodeUnsupportedOperation, "task %s waits for an answer from the caller that sent it; this request carries other credentials", t.id)
	}
	q := t.head()
	if q == nil { // answered elsewhere meanwhile
		return nil, rpcErr(a2awire.CodeUnsupportedOperation, "task %s no longer waits for input (answered through another channel); it is %s", t.id, t.view().state)
	}
	a, err := parseAnswer(q, sr)
	if err != nil {
		return nil, rpcErr(a2awire.CodeInvalidParams, "task %s: %v", t.id, err)
	}
	if !t.take(q, a) {
		return nil, rpcErr(a2awire.CodeUnsupportedOperation, "task %s no longer waits for that answer (answered through another channel); it is %s", t.id, t.view().state)
	}
	h.log.Debug("a2a input answered", "task", t.id, "accepted", a.Accepted)
	return t, nil
}

// answerParts is a message's parts reduced to what an answer reads.
type answerParts struct {
	texts []string
	data  []map[string]any
}

func partsOf(sr *sendRequest) (answerParts, error) {
	var ap answerParts
	if sr.msg03 != nil {
		for i, p := range sr.msg03.Parts {
			switch p := p.(type) {
			case a2a03.TextPart:
				ap.texts = append(ap.texts, p.Text)
			case a2a03.DataPart:
				ap.data = append(ap.data, p.Data)
			default:
				return ap, fmt.Errorf("parts[%d]: an answer is a text or a data part, not %T", i, p)
			}
		}
		return ap, nil
	}
	for i, p := range sr.msg10.Parts {
		if p == nil {
			return ap, fmt.Errorf("parts[%d]: empty part", i)
		}
		switch c := p.Content.(type) {
		case a2a1.Text:
			ap.texts = append(ap.texts, string(c))
		case a2a1.Data:
			m, ok := c.Value.(map[string]any)
			if !ok {
				return ap, fmt.Errorf("parts[%d]: an answer's data part is a JSON object", i)
			}
			ap.data = append(ap.data, m)
		default:
			return ap, fmt.Errorf("parts[%d]: an answer is a text or a data part", i)
		}
	}
	return ap, nil
}

// parseAnswer reads the answer to q from the message of sr.
func parseAnswer(q *inputPrompt, sr *sendRequest) (axocoatl.UserAnswer, error) {
	ap, err := partsOf(sr)
	if err != nil {
		return axocoatl.UserAnswer{}, err
	}
	if q.schema != nil {
		return parseQuestionAnswer(q, ap)
	}
	const how = `answer with the text allow or deny, or a data part {"approval":"allow"|"deny","remember":"once"|"always"}`
	a := axocoatl.UserAnswer{By: InputBy, Remember: "once"}
	switch {
	case len(ap.data) == 1 && len(ap.texts) == 0:
		d := ap.data[0]
		v, _ := d["approval"].(string)
		switch v {
		case "allow":
			a.Accepted = true
		case "deny":
		default:
			return a, fmt.Errorf("the data part's approval is %s: %s", describe(d["approval"]), how)
		}
		if r, ok := d["remember"]; ok && r != nil {
			s, _ := r.(string)
			if s != "once" && s != "always" {
				return a, fmt.Errorf("the data part's remember is %s: once or always", describe(r))
			}
			a.Remember = s
		}
		for k := range d {
			if k != "approval" && k != "remember" {
				return a, fmt.Errorf("the data part has the unknown key %q: %s", cut(k, 64), how)
			}
		}
		return a, nil
	case len(ap.texts) == 1 && len(ap.data) == 0:
		switch strings.ToLower(strings.TrimSpace(ap.texts[0])) {
		case "allow":
			a.Accepted = true
			return a, nil
		case "deny":
			return a, nil
		}
		return a, fmt.Errorf("the text %q is no answer to an approval: %s", cut(ap.texts[0], 64), how)
	}
	return a, fmt.Errorf("an answer is one part: %s", how)
}

func parseQuestionAnswer(q *inputPrompt, ap answerParts) (axocoatl.UserAnswer, error) {
	const how = "answer with one data part of the values the schema asks for, or the text decline"
	a := axocoatl.UserAnswer{By: InputBy}
	switch {
	case len(ap.data) == 1 && len(ap.texts) == 0 && q.p.Check != nil:
		// The asker's own check (approval's): the one place answers are
		// validated, defaults filled in.
		content, err := q.p.Check(ap.data[0])
		if err != nil {
			return a, fmt.Errorf("%w; %s", err, how)
		}
		a.Accepted, a.Content = true, content
		return a, nil
	case len(ap.data) == 1 && len(ap.texts) == 0:
		props := q.schema.Schema().Properties
		for k, v := range ap.data[0] {
			if _, ok := props[k]; !ok {
				return a, fmt.Errorf("%q is not a property of the question's schema; %s", cut(k, 64), how)
			}
			if !flat(v) {
				return a, fmt.Errorf("the value of %q is not a string, number, boolean or list of strings; %s", cut(k, 64), how)
			}
		}
		if err := q.schema.Validate(ap.data[0]); err != nil {
			return a, fmt.Errorf("the values do not match the question's schema: %v; %s", err, how)
		}
		a.Accepted, a.Content = true, ap.data[0]
		return a, nil
	case len(ap.texts) == 1 && len(ap.data) == 0:
		switch strings.ToLower(strings.TrimSpace(ap.texts[0])) {
		case "decline", "cancel", "deny":
			return a, nil
		}
		return a, fmt.Errorf("the text %q is no answer to a question: %s", cut(ap.texts[0], 64), how)
	}
	return a, fmt.Errorf("an answer is one part: %s", how)
}

// flat reports whether v is a value a form field holds.
func flat(v any) bool {
	switch v := v.(type) {
	case string, float64, bool, json.Number, int, int64:
		return true
	case []any:
		for _, e := range v {
			if _, ok := e.(string); !ok {
				return false
			}
		}
		return true
	}
	return false
}

func describe(v any) string {
	if v == nil {
		return "missing"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "not a string"
	}
	return cut(string(b), 64)
}

// promptMessage03 is the status message of an input-required task.
func (t *task) promptMessage03(q *inputPrompt) *a2a03.Message {
	return &a2a03.Message{
		ID: q.msgID, ContextID: t.contextID, TaskID: t.id, Role: a2a03.MessageRoleAgent,
		Parts: a2a03.ContentParts{a2a03.TextPart{Text: q.text}, a2a03.DataPart{Data: q.data}},
	}
}

func (t *task) promptMessageV1(q *inputPrompt) *a2a1.Message {
	return &a2a1.Message{
		ID: q.msgID, ContextID: t.contextID, TaskID: a2a1.TaskID(t.id), Role: a2a1.MessageRoleAgent,
		Parts: a2a1.ContentParts{a2a1.NewTextPart(q.text), a2a1.NewDataPart(q.data)},
	}
}

// interruptEvent is the status update a stream ends with when its task
// is input-required (v, as it was then).
func (o *out) interruptEvent(t *task, v view) any {
	if o.g == gen10 {
		return a2a1.StreamResponse{Event: &a2a1.TaskStatusUpdateEvent{
			TaskID: a2a1.TaskID(t.id), ContextID: t.contextID, Status: t.statusV1(v),
		}}
	}
	return &a2a03.TaskStatusUpdateEvent{TaskID: t.id, ContextID: t.contextID, Status: t.status(v), Final: true}
}
