package mcpclient

import (
	"context"
	"encoding/json"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callInfo is one tool call in flight, for the questions its server asks
// while it runs.
type callInfo struct {
	id   uint64 // in the server's calls
	call axocoatl.ToolCall
	// ctx is the call's: it carries the run's clock and the door's
	// UserPrompter, and ends with the call.
	ctx context.Context
}

type callKey struct{}

// elicit is the client's elicitation handler: a server asks our user to
// fill a form during a tool call. It serves both eras: a 2025-11-25
// elicitation/create request, and each form input request of a 2026-07-28
// InputRequiredResult (the go-sdk fulfils those through this handler
// inside the CallTool, then retries the call with inputResponses and the
// server's requestState).
//
// Which call asks: in the 2026-07-28 era the input request is the answer
// to our own tools/call, so ctx is that call's (exact). A 2025-11-25
// request names no call the go-sdk lets us see, so it is the server's only
// call in flight when there is one; with none or several in flight the
// question is asked for the server alone (no tool, agent or task; no
// door's prompter: only the dashboard, the HTTP API and the WebSocket can
// answer it), and the log says so.
//
// The question goes to the Engine's questioner (the approval module:
// [axocoatl.Engine.AskQuestion]); while it waits, the call's own timeout
// is held. Nobody to ask, a refused question (over a bound, an unsupported
// schema) or no answer in time: decline. URL-mode elicitation is not
// declared, and declined.
func (s *server) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	p := req.Params
	if p.Mode == "url" {
		s.log.Info("mcp server asked for URL elicitation; declined (only form elicitation is declared)", "server", s.cfg.Name)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	var schema json.RawMessage
	if p.RequestedSchema != nil {
		b, err := json.Marshal(p.RequestedSchema)
		if err != nil {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
		schema = s.redact.Bytes(b)
	}
	q := axocoatl.Question{Server: s.cfg.Name, Message: s.redact.String(p.Message), Schema: schema}
	sctx := s.sessionCtx(req.Session)
	if sctx == nil {
		return &mcp.ElicitResult{Action: "decline"}, nil // the session is closing
	}
	base := ctx
	info, _ := ctx.Value(callKey{}).(*callInfo)
	if info == nil {
		var n int
		if info, n = s.calls.only(); info != nil {
			base = info.ctx // the call's: its door, its run's clock
		} else {
			s.log.Info("mcp server asks a question that cannot be tied to one tool call; asked for the server alone", "server", s.cfg.Name, "calls_in_flight", n)
		}
	}
	// Withdrawn when the call ends, the server cancels its request, or the
	// session ends (a session's Close waits for this handler).
	qctx, cancel := context.WithCancel(base)
	defer cancel()
	defer context.AfterFunc(sctx, cancel)()
	if base != ctx {
		defer context.AfterFunc(ctx, cancel)()
	}
	if info != nil {
		q.Tool, q.AgentID, q.TaskID = info.call.Tool, info.call.AgentID, info.call.TaskID
		defer s.calls.hold(info.id)()
	}
	ans, err := s.eng.AskQuestion(qctx, q)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.log.Warn("mcp server's question declined: it could not be asked", "server", s.cfg.Name, "tool", q.Tool, "error", err)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	if !ans.Accepted {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	content := ans.Content
	if content == nil {
		content = map[string]any{}
	}
	return &mcp.ElicitResult{Action: "accept", Content: content}, nil
}

// sessionLife is the ctx of one live session (see server.sessions).
type sessionLife struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func (s *server) openSession(cs *mcp.ClientSession) {
	ctx, cancel := context.WithCancel(s.stopped)
	s.sessionsMu.Lock()
	s.sessions[cs] = sessionLife{ctx, cancel}
	s.sessionsMu.Unlock()
}

// endSession withdraws the questions asked on cs; it may be called more
// than once.
func (s *server) endSession(cs *mcp.ClientSession) {
	s.sessionsMu.Lock()
	l, ok := s.sessions[cs]
	delete(s.sessions, cs)
	s.sessionsMu.Unlock()
	if ok {
		l.cancel()
	}
}

// sessionCtx is the ctx of a live session, nil for one that has ended (or
// a request that names none).
func (s *server) sessionCtx(sess mcp.Session) context.Context {
	cs, _ := sess.(*mcp.ClientSession)
	s.sessionsMu.Lock()
	defer s.sessionsMu.Unlock()
	if l, ok := s.sessions[cs]; ok {
		return l.ctx
	}
	return nil
}
