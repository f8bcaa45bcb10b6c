package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/internal/httpguard"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/mcpclient"
)

// errorBody is the contract's error shape: {"error":{"code","message"}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	TaskID  string `json:"task_id,omitempty"`
}

func decodeJSON(w http.ResponseWriter, r *http.Request, dst any) bool {
	return httpguard.DecodeJSON(w, r, dst)
}

// api holds the daemon's own HTTP handlers.
type api struct {
	d       *daemon
	ready   *atomic.Bool
	timeout time.Duration // per request
}

func (a *api) mount(m *mux) error {
	health := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return errors.Join(
		m.public(http.MethodGet, "/health", health),
		m.public(http.MethodHead, "/health", health),
		m.public(http.MethodGet, "/health/live", health),
		m.public(http.MethodHead, "/health/live", health),
		m.public(http.MethodGet, "/health/ready", http.HandlerFunc(a.healthReady)),
		m.public(http.MethodHead, "/health/ready", http.HandlerFunc(a.healthReady)),
		m.private(http.MethodGet, "/api/agents", http.HandlerFunc(a.listAgents)),
		m.private(http.MethodGet, "/api/agents/:id", http.HandlerFunc(a.getAgent)),
		m.private(http.MethodPost, "/api/agents/:id/execute", http.HandlerFunc(a.execute)),
		m.private(http.MethodPost, "/api/events", http.HandlerFunc(a.publishEvent)),
		m.private(http.MethodGet, "/api/tools", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"tools": a.d.rt.Tools()})
		})),
	)
}

// healthReady is 200 once the agents are booted and every MCP server's
// first connect attempt has ended (a request before that would run without
// its tools); the body lists each server's state.
func (a *api) healthReady(w http.ResponseWriter, _ *http.Request) {
	status, code := "ready", http.StatusOK
	if !a.ready.Load() || !a.d.rt.MCPReady() {
		status, code = "not_ready", http.StatusServiceUnavailable
	}
	servers := a.d.rt.MCPStatus()
	if servers == nil {
		servers = []mcpclient.ServerStatus{}
	}
	writeJSON(w, code, map[string]any{"status": status, "agents": len(a.d.engine.Agents()), "mcp_servers": servers})
}

// agentView is an agent as the API shows it.
type agentView struct {
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

func viewOf(a axocoatl.AgentInfo) agentView {
	return agentView{
		ID: a.ID, Name: a.Name, Description: a.Description, Provider: a.Provider, Model: a.Model,
		Status: a.Status(), Running: a.Running, Tools: a.Tools,
		MaxIterations: a.MaxIterations, TimeoutSecs: a.Timeout.Seconds(), Node: a.Node,
	}
}

func (a *api) listAgents(w http.ResponseWriter, _ *http.Request) {
	infos := a.d.engine.Agents()
	out := make([]agentView, len(infos))
	for i, info := range infos {
		out[i] = viewOf(info)
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": out})
}

func (a *api) getAgent(w http.ResponseWriter, r *http.Request) {
	id := httprouter.ParamsFromContext(r.Context()).ByName("id")
	info, err := a.d.engine.Agent(id)
	if err != nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("agent %q not found", id))
		return
	}
	writeJSON(w, http.StatusOK, viewOf(info))
}

type executeRequest struct {
	Input *string `json:"input"`
}

type executeResponse struct {
	TaskID  string `json:"task_id"`
	AgentID string `json:"agent_id"`
	Status  string `json:"status"`
	Output  string `json:"output"`
}

func (a *api) execute(w http.ResponseWriter, r *http.Request) {
	id := httprouter.ParamsFromContext(r.Context()).ByName("id")
	info, err := a.d.engine.Agent(id)
	if err != nil {
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
	ctx := r.Context()
	if a.timeout < info.Timeout {
		// The Engine bounds the run by the agent's timeout already; a
		// second timer is needed only when the request's bound is shorter.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, a.timeout, errRequestTimeout)
		defer cancel()
	}
	res, err := a.d.engine.ExecuteRequest(ctx, axocoatl.Request{AgentID: id, Input: *req.Input, Source: axocoatl.SourceAPI})
	if err != nil {
		status, code := executeStatus(err)
		msg := err.Error()
		if errors.Is(context.Cause(ctx), errRequestTimeout) && errors.Is(err, context.DeadlineExceeded) {
			// The Engine words it as the agent's own timeout, which did
			// not fire: name the bound that did.
			msg = fmt.Sprintf("agent %s: timed out after %s (server.request_timeout): %v", id, a.timeout, context.DeadlineExceeded)
		}
		if errors.Is(err, axocoatl.ErrBusy) {
			w.Header().Set("Retry-After", "1")
		}
		writeJSON(w, status, errorBody{errorDetail{Code: code, Message: msg, TaskID: res.TaskID}})
		return
	}
	writeJSON(w, http.StatusOK, executeResponse{TaskID: res.TaskID, AgentID: res.AgentID, Status: "completed", Output: res.Output})
}

// errRequestTimeout is the cause of an execute cut by server.request_timeout.
var errRequestTimeout = errors.New("server.request_timeout")

// executeStatus maps an Execute error to its HTTP status, in one place.
func executeStatus(err error) (int, string) {
	switch {
	case errors.Is(err, axocoatl.ErrAgentNotFound):
		return http.StatusNotFound, "not_found"
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

// reservedEvents are published only by the Engine and its modules; a
// client may not forge them.
var reservedEvents = map[string]bool{
	axocoatl.EventAgentActivated: true, axocoatl.EventTaskCompleted: true, axocoatl.EventAgentFailed: true,
	axocoatl.EventToolCalled: true, axocoatl.EventToolResult: true,
	approval.EventRequested: true, approval.EventResolved: true,
	// A verdict as an event resolves an approval: only the module sends it.
	approval.EventVerdict: true, approval.EventSync: true, approval.EventPending: true,
	mcpclient.EventServerConnected: true, mcpclient.EventServerDisconnected: true, mcpclient.EventToolChanged: true,
}

type publishRequest struct {
	Type       string          `json:"type"`
	Payload    json.RawMessage `json:"payload"`
	ProducedBy string          `json:"produced_by"`
}

func (a *api) publishEvent(w http.ResponseWriter, r *http.Request) {
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
	case reservedEvents[req.Type]:
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
	ev.Class = a.d.engine.ClassOf(ev.Type)
	if err := a.d.engine.Bus().Publish(r.Context(), ev); err != nil {
		// Closed, or NATS away with its reconnect buffer full: the event
		// is lost and counted as missed; the reason carries no secret.
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the event bus cannot take the event: "+err.Error())
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"id": ev.ID, "type": ev.Type})
}
