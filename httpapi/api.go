package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"unicode/utf8"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/internal/jsonio"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// ErrorBody is the API's error shape: {"error":{"code","message"}}, with
// the task of a failed execute.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of [ErrorBody].
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	TaskID  string `json:"task_id,omitempty"`
	// ConversationID is the conversation a failed turn was recorded in
	// (a "new" one's id included), to continue it.
	ConversationID string `json:"conversation_id,omitempty"`
	// Usage is what a failed run's model calls used (a failed execute's
	// error only).
	Usage *agent.Usage `json:"usage,omitempty"`
}

func decodeJSON(w http.ResponseWriter, r *http.Request, dst any) bool {
	return jsonio.DecodeJSON(w, r, dst)
}

func writeJSON(w http.ResponseWriter, status int, v any) { jsonio.WriteJSON(w, status, v) }

func writeError(w http.ResponseWriter, status int, code, msg string) {
	jsonio.WriteError(w, status, code, msg)
}

func (m *Module) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// healthReady is 200 once the module is started and Config.Ready says the
// host is (a request before that would run without its MCP servers'
// tools), 503 from Shutdown on; the body lists each MCP server's state.
func (m *Module) healthReady(w http.ResponseWriter, _ *http.Request) {
	status, code := "ready", http.StatusOK
	if !m.ready.Load() || m.cfg.Ready != nil && !m.cfg.Ready() {
		status, code = "not_ready", http.StatusServiceUnavailable
	}
	var servers any = []any{}
	if m.cfg.MCPServers != nil {
		servers = m.cfg.MCPServers()
	}
	writeJSON(w, code, map[string]any{"status": status, "agents": len(m.eng.Agents()), "mcp_servers": servers})
}

func (m *Module) listTools(w http.ResponseWriter, r *http.Request) {
	if m.cfg.Tools != nil {
		tools := m.cfg.Tools()
		if id := axocoatl.IdentityFrom(r.Context()); id.Restricted() {
			tools = visibleTools(id, tools)
		}
		writeJSON(w, http.StatusOK, map[string]any{"tools": tools})
		return
	}
	type tool struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Server      string `json:"server,omitempty"`
	}
	out := []tool{}
	for _, t := range m.eng.Tools() {
		out = append(out, tool{t.Name, t.Description, t.Server})
	}
	writeJSON(w, http.StatusOK, map[string]any{"tools": out})
}

// serveMetrics: the counters name every agent, so a caller that sees only
// some is refused them.
func (m *Module) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if id := axocoatl.IdentityFrom(r.Context()); id.Restricted() {
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("%q sees only some agents; the metrics cover every agent", id.Name))
		return
	}
	m.met.handler.ServeHTTP(w, r)
}

// WhoamiResponse is the answer of GET /api/whoami: who the request's
// credentials say the caller is, and what it may do (the dashboard shows
// only that).
type WhoamiResponse struct {
	// Authenticated: the request carried valid credentials, or the server
	// needs none.
	Authenticated bool `json:"authenticated"`
	// AuthRequired: the server asks for credentials on its API.
	AuthRequired bool `json:"auth_required"`
	// Name names the credential ("" when none was needed or shown).
	Name   string           `json:"name,omitempty"`
	Scopes []axocoatl.Scope `json:"scopes"`
	// Agents are the agent globs it is limited to; empty: every agent.
	Agents []string `json:"agents,omitempty"`
}

func (m *Module) whoami(w http.ResponseWriter, r *http.Request) {
	id := axocoatl.IdentityFrom(r.Context())
	required := m.eng.AuthRequired()
	out := WhoamiResponse{AuthRequired: required, Scopes: []axocoatl.Scope{}}
	switch {
	case id != nil:
		out.Authenticated, out.Name, out.Scopes, out.Agents = true, id.Name, id.Scopes, id.Agents
	case !required:
		out.Authenticated, out.Scopes = true, []axocoatl.Scope{axocoatl.ScopeAdmin}
	}
	writeJSON(w, http.StatusOK, out)
}

// AgentView is an agent as GET /api/agents shows it: an
// [axocoatl.AgentInfo] in the API's JSON shape.
type AgentView struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	Description   string   `json:"description"`
	Provider      string   `json:"provider"`
	Model         string   `json:"model"`
	Status        string   `json:"status"` // idle | running
	Running       int      `json:"running"`
	Tools         []string `json:"tools"` // allow-list globs; null = all tools
	MaxIterations int      `json:"max_iterations"`
	TimeoutSecs   float64  `json:"timeout_secs"`
	Node          string   `json:"node,omitempty"` // the daemon it runs on; omitted: this one
}

func viewOf(a axocoatl.AgentInfo) AgentView {
	return AgentView{
		ID: a.ID, Name: a.Name, Description: a.Description, Provider: a.Provider, Model: a.Model,
		Status: a.Status(), Running: a.Running, Tools: a.Tools,
		MaxIterations: a.MaxIterations, TimeoutSecs: a.Timeout.Seconds(), Node: a.Node,
	}
}

func (m *Module) listAgents(w http.ResponseWriter, r *http.Request) {
	infos := m.eng.AgentsFor(r.Context())
	out := make([]AgentView, len(infos))
	for i, info := range infos {
		out[i] = viewOf(info)
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": out})
}

func (m *Module) getAgent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	info, err := m.eng.AgentFor(r.Context(), id)
	if err != nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("agent %q not found", id))
		return
	}
	writeJSON(w, http.StatusOK, viewOf(info))
}

type executeRequest struct {
	Input *string `json:"input"`
	// ConversationID makes the task a turn of a conversation: "new"
	// starts one, a known id continues it, an unknown well-formed id
	// starts one of that id; absent or "": one-shot.
	ConversationID string `json:"conversation_id"`
}

// ExecuteResponse is the answer of POST /api/agents/{id}/execute: the
// [axocoatl.Result] of the run.
type ExecuteResponse struct {
	TaskID  string `json:"task_id"`
	AgentID string `json:"agent_id"`
	Status  string `json:"status"`
	Output  string `json:"output"`
	// ConversationID is the conversation the task was a turn of; absent
	// for a one-shot task.
	ConversationID string `json:"conversation_id,omitempty"`
	// Usage is the tokens the run's model calls used, summed.
	Usage agent.Usage `json:"usage"`
}

func (m *Module) execute(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := m.eng.AgentFor(r.Context(), id); err != nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("agent %q not found", id))
		return
	}
	var req executeRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if req.Input == nil {
		writeError(w, http.StatusBadRequest, "bad_request", `"input" is required: {"input": "…"}`)
		return
	}
	var sse *sseExecute
	var onEvent func(agent.RunEvent)
	if wantsSSE(r) {
		sse = newSSEExecute(w)
		onEvent = sse.onEvent
	}
	out, fail := m.runExecute(r.Context(), id, *req.Input, req.ConversationID, "", onEvent)
	if fail != nil {
		if fail.retryAfter {
			w.Header().Set("Retry-After", "1")
		}
		if sse != nil && sse.started {
			// The stream has begun: its status is sent, so the error is
			// its last event.
			sse.final("error", fail.body)
			return
		}
		writeJSON(w, fail.status, fail.body)
		return
	}
	if sse != nil {
		sse.final("result", out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// executeFailure is a failed execute: its HTTP status, whether the client
// should retry after a second (busy), and its error body.
type executeFailure struct {
	status     int
	retryAfter bool
	body       ErrorBody
}

// runExecute runs one execute of agent id, for the HTTP door and the
// event stream's execute command alike: bounded by server.request_timeout
// (when shorter than the agent's own timeout), its errors mapped to their
// status and body in one place. taskID "" lets the Engine choose it;
// onEvent, when not nil, is the run's [axocoatl.Request].OnEvent.
func (m *Module) runExecute(ctx context.Context, id, input, conversationID, taskID string, onEvent func(agent.RunEvent)) (ExecuteResponse, *executeFailure) {
	info, err := m.eng.AgentFor(ctx, id)
	if err != nil {
		return ExecuteResponse{}, &executeFailure{status: http.StatusNotFound,
			body: ErrorBody{ErrorDetail{Code: "not_found", Message: fmt.Sprintf("agent %q not found", id)}}}
	}
	if m.cfg.RequestTimeout < info.Timeout {
		// The Engine bounds the run by the agent's timeout already; a
		// second timer is needed only when the request's bound is shorter.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, m.cfg.RequestTimeout, errRequestTimeout)
		defer cancel()
	}
	// An unknown id starts a conversation of that id: the client chose
	// it, as the API promises ("new" or a fresh id starts one).
	run := axocoatl.Request{
		AgentID: id, Input: input, Source: axocoatl.SourceAPI, TaskID: taskID,
		ConversationID: conversationID, CreateConversation: conversationID != "",
		OnEvent: onEvent,
	}
	res, err := m.eng.ExecuteRequest(ctx, run)
	if err != nil {
		status, code := executeStatus(err)
		msg := err.Error()
		retry := errors.Is(err, axocoatl.ErrBusy)
		if cs, cc, cm, ok := conversationStatus(err); ok {
			status, code, msg = cs, cc, cm
			retry = retry || code == "conversation_busy"
		}
		if errors.Is(context.Cause(ctx), errRequestTimeout) && errors.Is(err, context.DeadlineExceeded) {
			// The Engine words it as the agent's own timeout, which did
			// not fire: name the bound that did.
			msg = fmt.Sprintf("agent %s: timed out after %s (server.request_timeout): %v", id, m.cfg.RequestTimeout, context.DeadlineExceeded)
		}
		body := ErrorBody{ErrorDetail{Code: code, Message: msg, TaskID: res.TaskID, ConversationID: res.ConversationID}}
		if res.Usage != (agent.Usage{}) {
			body.Error.Usage = &res.Usage
		}
		return ExecuteResponse{}, &executeFailure{status: status, retryAfter: retry, body: body}
	}
	return ExecuteResponse{TaskID: res.TaskID, AgentID: res.AgentID, Status: "completed", Output: res.Output, ConversationID: res.ConversationID, Usage: res.Usage}, nil
}

// errRequestTimeout is the cause of an execute cut by server.request_timeout.
var errRequestTimeout = errors.New("server.request_timeout")

// executeStatus maps an Execute error to its HTTP status, in one place.
func executeStatus(err error) (int, string) {
	switch {
	case errors.Is(err, axocoatl.ErrAgentNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, axocoatl.ErrForbidden):
		return http.StatusForbidden, "forbidden"
	case errors.Is(err, axocoatl.ErrUnavailable): // another daemon's agent, out of reach now
		return http.StatusServiceUnavailable, "cluster_unavailable"
	case errors.Is(err, axocoatl.ErrBusy):
		return http.StatusServiceUnavailable, "busy"
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "timeout"
	case errors.Is(err, provider.ErrProvider):
		return http.StatusBadGateway, "provider_failed"
	case errors.Is(err, axocoatl.ErrClosed):
		return http.StatusServiceUnavailable, "shutting_down"
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, "canceled"
	}
	return http.StatusInternalServerError, "agent_failed"
}

// eventTypeRE is the shape of a custom event type.
var eventTypeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.:-]{0,127}$`)

type publishRequest struct {
	Type       string          `json:"type"`
	Payload    json.RawMessage `json:"payload"`
	ProducedBy string          `json:"produced_by"`
}

func (m *Module) publishEvent(w http.ResponseWriter, r *http.Request) {
	var req publishRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	switch {
	case req.Type == "":
		writeError(w, http.StatusBadRequest, "bad_request", `"type" is required`)
		return
	case !eventTypeRE.MatchString(req.Type):
		writeError(w, http.StatusBadRequest, "bad_request", `"type" must start with a letter and use only letters, digits and _ . : - (at most 128)`)
		return
	case m.isReserved(req.Type):
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("%q is published by the runtime itself; choose another type", req.Type))
		return
	}
	if !utf8.Valid(req.Payload) {
		// JSON is UTF-8; the event would reach WebSocket text frames,
		// which a browser drops the whole connection over.
		writeError(w, http.StatusBadRequest, "bad_request", `"payload" is not valid UTF-8`)
		return
	}
	if len(req.Payload) == 0 || string(req.Payload) == "null" {
		req.Payload = json.RawMessage("{}")
	}
	if req.ProducedBy == "" {
		req.ProducedBy = "api"
	}
	if len(req.ProducedBy) > 128 {
		writeError(w, http.StatusBadRequest, "bad_request", `"produced_by" longer than 128 characters`)
		return
	}
	ev, err := lattice.New(req.Type, req.ProducedBy, req.Payload)
	if err == nil {
		err = ev.Validate()
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", `"payload" must be a JSON object`)
		return
	}
	ev.Class = m.eng.ClassOf(ev.Type)
	if err := m.eng.Bus().Publish(r.Context(), ev); err != nil {
		// Closed, or NATS away with its reconnect buffer full: the event
		// is lost and counted as missed; the reason carries no secret.
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the event bus cannot take the event: "+err.Error())
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"id": ev.ID, "type": ev.Type})
}

// visibleTools narrows a tool list in its JSON shape (objects with an
// "agents" list of the agents allowed each tool) for an identity that sees
// only some agents: each tool's agents are those it sees, and a tool only
// agents it does not see use is left out.
func visibleTools(id *axocoatl.Identity, tools any) any {
	b, err := json.Marshal(tools)
	var list []map[string]any
	if err != nil || json.Unmarshal(b, &list) != nil {
		return []any{}
	}
	out := make([]map[string]any, 0, len(list))
	for _, t := range list {
		agents, ok := t["agents"].([]any)
		if !ok || len(agents) == 0 {
			out = append(out, t)
			continue
		}
		seen := []any{}
		for _, a := range agents {
			if s, ok := a.(string); ok && id.SeesAgent(s) {
				seen = append(seen, s)
			}
		}
		if len(seen) > 0 {
			t["agents"] = seen
			out = append(out, t)
		}
	}
	return out
}
