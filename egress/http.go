package egress

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// ServeHTTP serves the module's API, relative to where the host mounts it:
//
//	GET  /api/webhooks                                  each webhook's host, filter and counters
//	GET  /api/webhooks/{name}/deliveries?status=&limit= recent deliveries with every attempt
//	POST /api/webhooks/{name}/deliveries/{id}/retry     send a failed or dead-lettered delivery again
//
// Every route goes through the Engine's guard ([axocoatl.Engine.GuardHTTP]).
// Before [Module.Start] every request gets 503 with code "not_started".
// Errors are {"error":{"code","message"}}.
func (m *Module) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := m.handler.Load()
	if h == nil {
		writeError(w, http.StatusServiceUnavailable, "not_started", "egress: module not started: pass it to Engine.Use")
		return
	}
	(*h).ServeHTTP(w, r)
}

// door is a route with its handler.
type door struct {
	axocoatl.Route
	serve http.HandlerFunc
}

// table is the one list of the module's routes: routes builds the mux
// from it, Routes hands it to hosts.
func (m *Module) table() []door {
	return []door{
		{axocoatl.Route{Method: http.MethodGet, Pattern: "/api/webhooks"}, m.serveList},
		{axocoatl.Route{Method: http.MethodGet, Pattern: "/api/webhooks/{name}/deliveries"}, m.serveDeliveries},
		{axocoatl.Route{Method: http.MethodPost, Pattern: "/api/webhooks/{name}/deliveries/{id}/retry"}, m.serveRetry},
	}
}

// Routes are the module's doors (see [Module.ServeHTTP]), each needing the
// API token, bodies bounded to 1 MiB.
func (m *Module) Routes() []axocoatl.Route {
	var out []axocoatl.Route
	for _, rt := range m.table() {
		out = append(out, rt.Route)
	}
	return out
}

func (m *Module) routes(e *axocoatl.Engine) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range m.table() {
		mux.Handle(rt.Method+" "+rt.Pattern, e.GuardHTTP(axocoatl.HTTPRoute{MaxBodyBytes: rt.MaxBodyBytes}, rt.serve))
	}
	mux.Handle("/api/webhooks/", e.GuardHTTP(axocoatl.HTTPRoute{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such route: "+r.Method+" "+r.URL.Path)
	})))
	return mux
}

type listResponse struct {
	Webhooks []WebhookStatus `json:"webhooks"`
	// Missed counts events the lattice dropped before egress queued them.
	Missed uint64 `json:"missed"`
}

func (m *Module) serveList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, listResponse{Webhooks: m.Status(), Missed: m.Missed()})
}

func (m *Module) serveDeliveries(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	if status != "" && !validStatus(status) {
		writeError(w, http.StatusBadRequest, "bad_request", "status must be queued, in_flight, delivered, failed or dead_lettered")
		return
	}
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, "bad_request", "limit must be a whole number from 1 to 1000")
			return
		}
		limit = n
	}
	ds, err := m.Deliveries(r.PathValue("name"), Status(status), limit)
	if err != nil {
		writeErr(w, err)
		return
	}
	if ds == nil {
		ds = []Delivery{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"deliveries": ds})
}

func (m *Module) serveRetry(w http.ResponseWriter, r *http.Request) {
	d, err := m.Retry(r.PathValue("name"), r.PathValue("id"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"delivery": d})
}

// writeErr maps the module's errors to statuses in one place.
func writeErr(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrWebhookNotFound):
		writeError(w, http.StatusNotFound, "webhook_not_found", err.Error())
	case errors.Is(err, ErrDeliveryNotFound):
		writeError(w, http.StatusNotFound, "delivery_not_found", err.Error())
	case errors.Is(err, ErrNotRetryable):
		writeError(w, http.StatusConflict, "not_retryable", err.Error())
	case errors.Is(err, ErrQueueFull):
		writeError(w, http.StatusServiceUnavailable, "queue_full", err.Error())
	case errors.Is(err, ErrClusterUnavailable):
		writeError(w, http.StatusServiceUnavailable, "cluster_unavailable", err.Error())
	case errors.Is(err, errNotRunning):
		writeError(w, http.StatusServiceUnavailable, "not_running", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	writeJSON(w, status, map[string]body{"error": {Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
