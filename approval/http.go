package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// The routes, relative to where the Module is mounted (the daemon mounts it
// at its root, so these are its paths):
//
//	GET    /api/approvals                            pending approvals {"approvals": [PendingApproval…]}
//	POST   /api/approvals/{id}                       verdict {"decision": "allow"|"deny", "remember": "once"|"always"} → Resolution
//	                                                 (a question: {"decision": "allow", "content": {…}} or {"decision": "deny"})
//	GET    /api/approvals/decisions                  remembered decisions {"decisions": [Remembered…]}
//	DELETE /api/approvals/decisions?agent_id=&tool=  revoke one → 204
//
// Errors are {"error": {"code", "message"}}: 400 bad_request, 404
// not_found, 409 already_resolved, 413 payload_too_large, 503
// not_started, 504 timeout (the Engine holding the approval did not
// answer).
const (
	PathApprovals = "/api/approvals"
	PathDecisions = "/api/approvals/decisions"
)

// maxVerdictBytes bounds a verdict's body.
const maxVerdictBytes = 64 << 10

// door is a route with its handler.
type door struct {
	axocoatl.Route
	serve http.HandlerFunc
}

// table is the one list of the module's routes: routes builds the mux
// from it, Routes hands it to hosts.
func (m *Module) table() []door {
	r := func(method, pattern string, scope axocoatl.Scope) axocoatl.Route {
		return axocoatl.Route{Method: method, Pattern: pattern, Scope: scope, MaxBodyBytes: maxVerdictBytes}
	}
	return []door{
		{r(http.MethodGet, PathApprovals, axocoatl.ScopeRead), m.serveList},
		{r(http.MethodPost, PathApprovals+"/{id}", axocoatl.ScopeApprove), m.serveVerdict},
		{r(http.MethodGet, PathDecisions, axocoatl.ScopeRead), m.serveDecisions},
		{r(http.MethodDelete, PathDecisions, axocoatl.ScopeApprove), m.serveForget},
	}
}

func (m *Module) routes() *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range m.table() {
		mux.HandleFunc(rt.Method+" "+rt.Pattern, rt.serve)
	}
	return mux
}

// guarded is the module's handler behind the Engine's guard, each request
// asking for the scope its route declares (read for one the mux does not
// know, answered 404 or 405).
func (m *Module) guarded(e *axocoatl.Engine) http.Handler {
	scopes := map[string]axocoatl.Scope{}
	byScope := map[axocoatl.Scope]http.Handler{}
	for _, rt := range append(m.table(), door{Route: axocoatl.Route{Scope: axocoatl.ScopeRead}}) {
		scopes[rt.Method+" "+rt.Pattern] = rt.Scope
		if byScope[rt.Scope] == nil {
			byScope[rt.Scope] = e.GuardHTTP(axocoatl.HTTPRoute{Scope: rt.Scope, MaxBodyBytes: maxVerdictBytes}, http.HandlerFunc(m.serveMux))
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scope := axocoatl.ScopeRead
		if _, pattern := m.mux.Handler(r); pattern != "" {
			scope = scopes[pattern]
		}
		byScope[scope].ServeHTTP(w, r)
	})
}

// Routes are the module's doors (see [PathApprovals]): the lists need
// [axocoatl.ScopeRead], a verdict and forgetting a decision
// [axocoatl.ScopeApprove]; bodies bounded to 64 KiB. A caller whose
// identity sees only some agents sees and decides only their approvals.
func (m *Module) Routes() []axocoatl.Route {
	var out []axocoatl.Route
	for _, rt := range m.table() {
		out = append(out, rt.Route)
	}
	return out
}

// serveMux answers what the mux has no route for in the API's error shape:
// 405 with Allow on a known path, else 404.
func (m *Module) serveMux(w http.ResponseWriter, r *http.Request) {
	if _, pattern := m.mux.Handler(r); pattern != "" {
		m.mux.ServeHTTP(w, r)
		return
	}
	p := r.URL.Path
	allow := ""
	switch {
	case p == PathApprovals:
		allow = "GET"
	case p == PathDecisions:
		allow = "GET, DELETE"
	case strings.HasPrefix(p, PathApprovals+"/") && !strings.Contains(p[len(PathApprovals)+1:], "/"):
		allow = "POST"
	}
	if allow == "" {
		writeError(w, http.StatusNotFound, "not_found", "no such route")
		return
	}
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, p, allow))
}

// ServeHTTP serves the module's routes (see PathApprovals), behind the
// Engine's HTTP guard ([axocoatl.Engine.GuardHTTP]). Before Start it
// answers 503 not_started.
func (m *Module) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := m.handlers.Load()
	if h == nil {
		writeError(w, http.StatusServiceUnavailable, "not_started", "the approval module is not started")
		return
	}
	(*h).ServeHTTP(w, r)
}

func (m *Module) serveList(w http.ResponseWriter, r *http.Request) {
	id := axocoatl.IdentityFrom(r.Context())
	writeJSON(w, http.StatusOK, map[string]any{"approvals": slices.DeleteFunc(m.Pending(), func(p PendingApproval) bool { return !id.SeesAgent(p.AgentID) })})
}

func (m *Module) serveDecisions(w http.ResponseWriter, r *http.Request) {
	id := axocoatl.IdentityFrom(r.Context())
	writeJSON(w, http.StatusOK, map[string]any{"decisions": slices.DeleteFunc(m.Decisions(), func(d Remembered) bool { return !id.SeesAgent(d.AgentID) })})
}

func (m *Module) serveForget(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	// agent_id may be empty (a decision for calls made outside any agent,
	// through Engine.CallTool) but must be given.
	agentID, tool := q.Get("agent_id"), q.Get("tool")
	switch {
	case !q.Has("agent_id") && tool == "":
		writeError(w, http.StatusBadRequest, "bad_request", `query parameters "agent_id" and "tool" are required`)
		return
	case !q.Has("agent_id"):
		writeError(w, http.StatusBadRequest, "bad_request", `query parameter "agent_id" is required`)
		return
	case tool == "":
		writeError(w, http.StatusBadRequest, "bad_request", `query parameter "tool" is required`)
		return
	}
	err := ErrDecisionNotFound
	if axocoatl.IdentityFrom(r.Context()).SeesAgent(agentID) {
		err = m.Forget(agentID, tool)
	}
	if err != nil {
		if errors.Is(err, ErrDecisionNotFound) {
			writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no remembered decision for agent %q and tool %q", agentID, tool))
			return
		}
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type verdictBody struct {
	Decision *string `json:"decision"`
	Remember *string `json:"remember"`
	Content  map[string]any
}

func (m *Module) serveVerdict(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxVerdictBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large", fmt.Sprintf("request body over %d bytes", maxVerdictBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "bad_request", "could not read the request body")
		return
	}
	v, msg := decodeVerdict(body)
	if msg != "" {
		writeError(w, http.StatusBadRequest, "bad_request", msg)
		return
	}
	res, err := m.resolve(r.Context(), id, *v.Decision, deref(v.Remember), v.Content, "http")
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, res)
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no pending approval %q", id))
	case errors.Is(err, axocoatl.ErrForbidden):
		writeError(w, http.StatusForbidden, "forbidden", err.Error())
	case errors.Is(err, ErrAlreadyResolved):
		writeError(w, http.StatusConflict, "already_resolved", err.Error())
	case errors.Is(err, ErrBadDecision), errors.Is(err, ErrBadRemember), errors.Is(err, ErrBadAnswer):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	case errors.Is(err, ErrNoAnswer):
		writeError(w, http.StatusGatewayTimeout, "timeout", err.Error())
	case errors.Is(err, ErrNotStarted), errors.Is(err, ErrStopped):
		writeError(w, http.StatusServiceUnavailable, "not_started", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// decodeVerdict parses a verdict body strictly and words what is wrong
// with it in the API's terms (no Go type names).
func decodeVerdict(body []byte) (verdictBody, string) {
	var v verdictBody
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return v, `a JSON body {"decision": "allow"|"deny", "remember": "once"|"always"} is required`
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &members); err != nil {
		if !json.Valid(trimmed) {
			return v, "invalid JSON body"
		}
		return v, "the body must be a JSON object, not " + jsonKind(trimmed)
	}
	for k := range members {
		if k != "decision" && k != "remember" && k != "content" {
			return v, fmt.Sprintf("unknown member %q (allowed: decision, remember, content)", k)
		}
	}
	str := func(name string) (*string, string) {
		raw, ok := members[name]
		if !ok {
			return nil, ""
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || string(bytes.TrimSpace(raw)) == "null" {
			return nil, fmt.Sprintf("%q must be a string, not %s", name, jsonKind(raw))
		}
		return &s, ""
	}
	var msg string
	if v.Decision, msg = str("decision"); msg != "" {
		return v, msg
	}
	if v.Decision == nil {
		return v, `"decision" is required ("allow" or "deny")`
	}
	if *v.Decision != Allow && *v.Decision != Deny {
		return v, fmt.Sprintf(`"decision" must be "allow" or "deny", not %q`, *v.Decision)
	}
	if v.Remember, msg = str("remember"); msg != "" {
		return v, msg
	}
	if v.Remember != nil && *v.Remember != Once && *v.Remember != Always {
		return v, fmt.Sprintf(`"remember" must be "once" or "always", not %q`, *v.Remember)
	}
	if raw, ok := members["content"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		if len(raw) > MaxAnswerBytes {
			return v, fmt.Sprintf(`"content" is over %d bytes`, MaxAnswerBytes)
		}
		if err := json.Unmarshal(raw, &v.Content); err != nil || v.Content == nil {
			return v, `"content" must be an object of the question's properties, not ` + jsonKind(raw)
		}
	}
	return v, ""
}

func jsonKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
