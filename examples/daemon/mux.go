package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/httpguard"
	"github.com/axocoatl/axocoatl-go/internal/jsonio"
)

// mux is the daemon's router. Every route is mounted as public (no token:
// health, agent cards, the dashboard page) or private (token required when
// one is configured); both go through the Engine's HTTP guard, the one every
// module's door uses too. Path parameters use httprouter syntax (/x/:id);
// read them with httprouter.ParamsFromContext(r.Context()).ByName("id").
type mux struct {
	router *httprouter.Router
	engine *axocoatl.Engine
	routes []route // what is mounted, for tests and the auth audit
}

type route struct {
	method, path string
	public       bool
}

func newMux(eng *axocoatl.Engine, bodyTimeout time.Duration, log *slog.Logger) *mux {
	r := httprouter.New()
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, p any) {
		// A bug in one handler answers 500 and is logged; the daemon stays up.
		log.Error("handler panicked", "method", req.Method, "path", req.URL.Path, "panic", fmt.Sprint(p))
		writeError(w, http.StatusInternalServerError, "internal", "internal error")
	}
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleOPTIONS = false
	// Routes bound their bodies in the guard; these bound the drain
	// net/http does before answering an unknown route.
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		httpguard.ArmBodyDeadline(w, req, bodyTimeout)
		writeError(w, http.StatusNotFound, "not_found", "no such route")
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		httpguard.ArmBodyDeadline(w, req, bodyTimeout)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this route")
	})
	return &mux{router: r, engine: eng}
}

func (m *mux) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.router.ServeHTTP(w, r) }

// public mounts h with no token, behind the guard (Host, Origin, 1 MiB body).
func (m *mux) public(method, path string, h http.Handler) error {
	return m.mount(route{method, path, true}, m.engine.GuardHTTP(axocoatl.HTTPRoute{Public: true}, h))
}

// private mounts h behind the guard and the API token.
func (m *mux) private(method, path string, h http.Handler) error {
	return m.mount(route{method, path, false}, m.engine.GuardHTTP(axocoatl.HTTPRoute{}, h))
}

// mount registers h as is: for handlers that guard themselves (the modules'
// doors, the WebSocket stream).
func (m *mux) mount(rt route, h http.Handler) (err error) {
	// httprouter panics on conflicting routes; turn that into an error
	// that names the route.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("route %s %s: %v", rt.method, rt.path, p)
		}
	}()
	m.router.Handler(rt.method, rt.path, h)
	m.routes = append(m.routes, rt)
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) { jsonio.WriteJSON(w, status, v) }

func writeError(w http.ResponseWriter, status int, code, msg string) {
	jsonio.WriteError(w, status, code, msg)
}

func quote(s string) string { return jsonio.Quote(s) }
