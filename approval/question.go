package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"time"
	"unicode/utf8"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// The kinds of pending item ([PendingApproval].Kind).
const (
	KindApproval = "approval"
	KindQuestion = "question"
)

// Bounds of questions (see [Module.AskQuestion]; docs/bounds.md).
const (
	// MaxQuestionsPerServer bounds the questions one server (a
	// [axocoatl.Question].Server) may have pending at once; one more is
	// refused with ErrTooManyQuestions (the MCP client declines it).
	MaxQuestionsPerServer = 4
	// MaxQuestionSchemaBytes bounds a question's requested schema, as
	// JSON.
	MaxQuestionSchemaBytes = 16 << 10
	// MaxQuestionProperties bounds the properties of a requested schema.
	MaxQuestionProperties = 32
	// MaxQuestionMessage bounds the question's text kept and shown, in
	// bytes (longer text is cut on a UTF-8 boundary).
	MaxQuestionMessage = 4096
	// MaxAnswerBytes bounds an answer's content, as JSON.
	MaxAnswerBytes = 16 << 10
)

// Errors of questions; check them with errors.Is.
var (
	// ErrBadSchema: the requested schema is not a flat object of
	// primitive properties, or is over a bound.
	ErrBadSchema = errors.New("unsupported requested schema")
	// ErrBadAnswer: an answer's content does not match the question's
	// schema (or is over MaxAnswerBytes); nothing was resolved.
	ErrBadAnswer = errors.New("answer does not match the question's schema")
	// ErrTooManyQuestions: the server has MaxQuestionsPerServer questions
	// pending already.
	ErrTooManyQuestions = errors.New("too many pending questions from this server")
)

// AskQuestion implements [axocoatl.Questioner]: a tool's server asks the
// user to fill a form. The question is a pending item like an approval
// (kind "question", listed by [Module.Pending], GET /api/approvals, the
// WebSocket's ready frame and EventRequested) with the requested schema;
// when ctx carries a door's [axocoatl.UserPrompter] it is asked through it
// too, and the first valid answer wins. The answer's content is checked
// against the schema (defaults filled in) before it is taken. No answer
// within [Config].Timeout is a decline (status "expired"); the end of ctx
// withdraws it (ctx's error); Stop withdraws it ([ErrStopped]). The agent's
// timeout does not run while it waits.
func (m *Module) AskQuestion(ctx context.Context, q axocoatl.Question) (axocoatl.UserAnswer, error) {
	if len(q.Schema) > MaxQuestionSchemaBytes {
		return axocoatl.UserAnswer{}, fmt.Errorf("%w: %d bytes, over %d", ErrBadSchema, len(q.Schema), MaxQuestionSchemaBytes)
	}
	form, err := parseForm(q.Schema)
	if err != nil {
		return axocoatl.UserAnswer{}, err
	}
	var schema bytes.Buffer
	if len(q.Schema) > 0 {
		_ = json.Compact(&schema, q.Schema) // valid: parseForm decoded it
	} else {
		schema.WriteString(`{"type":"object","properties":{}}`)
	}
	now := time.Now()
	p := &pending{
		info: PendingApproval{
			ApprovalID: lattice.NewID(now), Kind: KindQuestion, AgentID: clip(q.AgentID), TaskID: clip(q.TaskID),
			Tool: clip(q.Tool), Server: clip(q.Server), Message: clipTo(q.Message, MaxQuestionMessage),
			Schema: schema.Bytes(), RequestedAt: now.UTC(), ExpiresAt: now.Add(m.cfg.Timeout).UTC(), Holder: m.node,
		},
		verdict: make(chan Resolution, 1),
		form:    form,
	}
	if err := ctx.Err(); err != nil {
		return axocoatl.UserAnswer{}, err
	}
	prompter := axocoatl.UserPrompterFrom(ctx)
	m.mu.Lock()
	if !m.life.Running() {
		m.mu.Unlock()
		return axocoatl.UserAnswer{}, ErrStopped
	}
	n := 0
	for _, o := range m.local {
		if o.info.Kind == KindQuestion && o.info.Server == p.info.Server {
			n++
		}
	}
	if n >= MaxQuestionsPerServer {
		m.mu.Unlock()
		return axocoatl.UserAnswer{}, fmt.Errorf("%w: server %q has %d pending (max %d)", ErrTooManyQuestions, p.info.Server, n, MaxQuestionsPerServer)
	}
	m.local[p.info.ApprovalID] = p
	if prompter != nil {
		m.wg.Add(1) // under mu while started: Stop's Wait cannot have begun
	}
	m.mu.Unlock()

	resume := axocoatl.PauseRunClock(ctx)
	defer resume()
	m.publish(EventRequested, p.info)
	m.log.Info("question asked", "approval", p.info.ApprovalID, "server", p.info.Server, "tool", p.info.Tool,
		"agent", p.info.AgentID, "task", p.info.TaskID, "properties", len(form.props), "expires_at", p.info.ExpiresAt)
	if prompter != nil {
		door := m.startPrompt(ctx, func(pctx context.Context) { m.promptQuestion(pctx, prompter, p.info, form) })
		defer door.withdraw() // answered: withdraw the door's form before the answer is returned
	}

	timer := time.NewTimer(m.cfg.Timeout)
	defer timer.Stop()
	var r Resolution
	select {
	case r = <-p.verdict:
	case <-timer.C:
		r = m.settle(p, Deny, StatusExpired, "timeout")
	case <-ctx.Done():
		r = m.settle(p, Deny, StatusWithdrawn, "run_ended")
	case <-m.stopping:
		r = m.settle(p, Deny, StatusWithdrawn, "shutdown")
	}
	switch r.Status {
	case StatusApproved:
		return axocoatl.UserAnswer{Accepted: true, Content: r.content, By: r.ResolvedBy}, nil
	case StatusDenied, StatusExpired:
		return axocoatl.UserAnswer{By: r.ResolvedBy}, nil
	}
	if err := ctx.Err(); err != nil {
		return axocoatl.UserAnswer{}, err
	}
	return axocoatl.UserAnswer{}, ErrStopped
}

// Answer resolves a pending item with content: a question accepted (allow,
// content checked against its schema, defaults filled in; ErrBadAnswer
// loses nothing: the question stays pending) or declined (deny, content
// ignored). For an approval it is [Module.Resolve] (content must be nil).
func (m *Module) Answer(ctx context.Context, id, decision string, content map[string]any, resolvedBy string) (Resolution, error) {
	return m.resolve(ctx, id, decision, Once, content, resolvedBy)
}

// answerLocal applies a verdict to an item this Module holds; a question's
// content is checked before anything is claimed.
func (m *Module) answerLocal(id, decision, remember string, content map[string]any, by, verdictID string) (Resolution, error) {
	m.mu.Lock()
	held, ok := m.local[id]
	m.mu.Unlock()
	if ok && held.info.Kind == KindQuestion {
		if remember == Always {
			return Resolution{}, fmt.Errorf("%w: a question is answered once", ErrBadRemember)
		}
		if decision == Allow {
			checked, err := held.form.check(content)
			if err != nil {
				return Resolution{}, err
			}
			content = checked
		} else {
			content = nil
		}
	} else if ok && content != nil {
		return Resolution{}, fmt.Errorf("%w: an approval takes no content", ErrBadAnswer)
	}
	p, err := m.claim(id)
	if err != nil {
		return Resolution{}, err
	}
	status := StatusApproved
	if decision == Deny {
		status = StatusDenied
	}
	r := m.finish(p, decision, status, remember, by, verdictID)
	r.content = content
	p.verdict <- r
	return r, nil
}

// checkRemote checks an answer to a question another Engine holds against
// the schema its event carried, so that a mismatch is told at once (the
// holder checks again). Anything else passes unchanged.
func (m *Module) checkRemote(id, decision, remember string, content map[string]any) (map[string]any, error) {
	p, ok := m.repl.get(id)
	if ok && p.Kind != KindQuestion && content != nil {
		return nil, fmt.Errorf("%w: an approval takes no content", ErrBadAnswer)
	}
	if !ok || p.Kind != KindQuestion {
		return content, nil
	}
	if remember == Always {
		return nil, fmt.Errorf("%w: a question is answered once", ErrBadRemember)
	}
	if decision != Allow {
		return nil, nil
	}
	form, err := parseForm(p.Schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadAnswer, err)
	}
	return form.check(content)
}

// maxDoorTries bounds how often a question is put to the door again after
// an answer that does not match its schema (a door that calls
// [axocoatl.UserPrompt].Check refuses those itself and never gets here).
const maxDoorTries = 3

// promptQuestion puts the question to the door's user; an answer from
// anywhere else that comes first cancels ctx. The prompt's Check is the
// question's own schema check (the one answerLocal applies): a door
// refuses a bad answer with it and asks again. An answer that still does
// not match is put to the door again, with why, up to maxDoorTries.
func (m *Module) promptQuestion(ctx context.Context, pr axocoatl.UserPrompter, info PendingApproval, form *formSchema) {
	msg := "MCP server " + info.Server + " asks"
	if info.Tool != "" {
		msg += fmt.Sprintf(" (while agent %s calls tool %s)", info.AgentID, info.Tool)
	}
	msg += ": " + info.Message
	prompt := axocoatl.UserPrompt{Message: msg, Schema: info.Schema, Check: form.check}
	for try := 1; ; try++ {
		ans, err := pr.PromptUser(ctx, prompt)
		if err != nil {
			if ctx.Err() == nil {
				m.log.Info("could not ask the question through the door; waiting for another answer", "approval", info.ApprovalID, "error", err)
			}
			return
		}
		decision := Deny
		if ans.Accepted {
			decision = Allow
		}
		by := ans.By
		if by == "" {
			by = "user_prompt"
		}
		_, err = m.answerLocal(info.ApprovalID, decision, Once, ans.Content, by, "")
		if err == nil || errors.Is(err, ErrAlreadyResolved) || errors.Is(err, ErrNotFound) {
			return
		}
		if !errors.Is(err, ErrBadAnswer) || try >= maxDoorTries || ctx.Err() != nil {
			m.log.Warn("user's answer not applied; the question stays pending", "approval", info.ApprovalID, "error", err)
			return
		}
		prompt.Message = "Your answer was refused (" + err.Error() + "). " + msg
	}
}

// clipTo cuts s to n bytes on a UTF-8 boundary.
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// formSchema is a requested schema as MCP form elicitation allows it: an
// object of flat primitive properties.
type formSchema struct {
	props    map[string]*formProp
	required map[string]bool
}

type formProp struct {
	Type      string   `json:"type"`
	Format    string   `json:"format"`
	MinLength *int     `json:"minLength"`
	MaxLength *int     `json:"maxLength"`
	Minimum   *float64 `json:"minimum"`
	Maximum   *float64 `json:"maximum"`
	Enum      []any    `json:"enum"`
	OneOf     []struct {
		Const any `json:"const"`
	} `json:"oneOf"`
	Default any `json:"default"`
}

// parseForm reads a requested schema (empty: no properties) and refuses
// what a form cannot show: nested objects, arrays, unknown types.
func parseForm(raw json.RawMessage) (*formSchema, error) {
	f := &formSchema{props: map[string]*formProp{}, required: map[string]bool{}}
	if len(bytes.TrimSpace(raw)) == 0 {
		return f, nil
	}
	var s struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("%w: not a JSON schema object", ErrBadSchema)
	}
	if s.Type != "" && s.Type != "object" {
		return nil, fmt.Errorf("%w: type %q, want object", ErrBadSchema, s.Type)
	}
	if len(s.Properties) > MaxQuestionProperties {
		return nil, fmt.Errorf("%w: %d properties, over %d", ErrBadSchema, len(s.Properties), MaxQuestionProperties)
	}
	for name, pr := range s.Properties {
		if name == "" || len(name) > maxField {
			return nil, fmt.Errorf("%w: a property name must be 1 to %d bytes", ErrBadSchema, maxField)
		}
		var p formProp
		if err := json.Unmarshal(pr, &p); err != nil {
			return nil, fmt.Errorf("%w: property %q: %v", ErrBadSchema, name, err)
		}
		switch p.Type {
		case "string", "number", "integer", "boolean":
		default:
			return nil, fmt.Errorf("%w: property %q has type %q (a form takes string, number, integer, boolean)", ErrBadSchema, name, p.Type)
		}
		f.props[name] = &p
	}
	for _, name := range s.Required {
		if _, ok := f.props[name]; !ok {
			return nil, fmt.Errorf("%w: required property %q is not defined", ErrBadSchema, name)
		}
		f.required[name] = true
	}
	return f, nil
}

// check returns content with the schema's defaults filled in, or why it
// does not match.
func (f *formSchema) check(content map[string]any) (map[string]any, error) {
	if content != nil {
		if b, err := json.Marshal(content); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadAnswer, err)
		} else if len(b) > MaxAnswerBytes {
			return nil, fmt.Errorf("%w: %d bytes, over %d", ErrBadAnswer, len(b), MaxAnswerBytes)
		}
	}
	out := make(map[string]any, len(f.props))
	for name, v := range content {
		p, ok := f.props[name]
		if !ok {
			return nil, fmt.Errorf("%w: unknown property %q", ErrBadAnswer, name)
		}
		if v == nil {
			continue // as if not given
		}
		nv, err := p.check(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %q %s", ErrBadAnswer, name, err)
		}
		out[name] = nv
	}
	for name, p := range f.props {
		if _, ok := out[name]; ok {
			continue
		}
		if p.Default != nil {
			if nv, err := p.check(p.Default); err == nil {
				out[name] = nv
				continue
			}
		}
		if f.required[name] {
			return nil, fmt.Errorf("%w: %q is required", ErrBadAnswer, name)
		}
	}
	return out, nil
}

func (p *formProp) check(v any) (any, error) {
	if err := p.checkType(v); err != nil {
		return nil, err
	}
	if n, ok := v.(json.Number); ok {
		f, _ := n.Float64()
		v = f
	}
	if len(p.Enum) > 0 || len(p.OneOf) > 0 {
		for _, e := range p.Enum {
			if sameValue(e, v) {
				return v, nil
			}
		}
		for _, o := range p.OneOf {
			if sameValue(o.Const, v) {
				return v, nil
			}
		}
		return nil, errors.New("is not one of the allowed values")
	}
	return v, nil
}

func (p *formProp) checkType(v any) error {
	switch p.Type {
	case "string":
		s, ok := v.(string)
		if !ok {
			return errors.New("must be a string")
		}
		n := utf8.RuneCountInString(s)
		if p.MinLength != nil && n < *p.MinLength {
			return fmt.Errorf("must be at least %d characters", *p.MinLength)
		}
		if p.MaxLength != nil && n > *p.MaxLength {
			return fmt.Errorf("must be at most %d characters", *p.MaxLength)
		}
		return checkFormat(p.Format, s)
	case "boolean":
		if _, ok := v.(bool); !ok {
			return errors.New("must be true or false")
		}
		return nil
	}
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return errors.New("must be a number")
		}
	default:
		return errors.New("must be a number")
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return errors.New("must be a finite number")
	}
	if p.Type == "integer" && f != math.Trunc(f) {
		return errors.New("must be an integer")
	}
	if p.Minimum != nil && f < *p.Minimum {
		return fmt.Errorf("must be at least %v", *p.Minimum)
	}
	if p.Maximum != nil && f > *p.Maximum {
		return fmt.Errorf("must be at most %v", *p.Maximum)
	}
	return nil
}

// checkFormat checks the string formats MCP form elicitation names.
func checkFormat(format, s string) error {
	var err error
	switch format {
	case "email":
		var a *mail.Address
		if a, err = mail.ParseAddress(s); err == nil && a.Address != s {
			err = errors.New("not a bare address")
		}
	case "uri":
		var u *url.URL
		if u, err = url.Parse(s); err == nil && u.Scheme == "" {
			err = errors.New("no scheme")
		}
	case "date":
		_, err = time.Parse(time.DateOnly, s)
	case "date-time":
		_, err = time.Parse(time.RFC3339, s)
	}
	if err != nil {
		return fmt.Errorf("must be a valid %s", format)
	}
	return nil
}

// sameValue compares JSON values as decoded (numbers as float64).
func sameValue(a, b any) bool {
	af, aok := number(a)
	bf, bok := number(b)
	if aok || bok {
		return aok && bok && af == bf
	}
	switch a := a.(type) {
	case string:
		b, ok := b.(string)
		return ok && a == b
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	}
	return false // objects, arrays, null: never a form's value
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}
