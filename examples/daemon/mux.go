package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/axocoatl/axocoatl-go/secret"
)

// MaxBodyBytes bounds every request body; a larger one gets 413.
const MaxBodyBytes = 1 << 20

// mux is the daemon's router. Every route is mounted as public (no token:
// health, agent cards, the dashboard page) or private (token required when
// one is configured). Path parameters use httprouter syntax (/x/:id); read
// them with httprouter.ParamsFromContext(r.Context()).ByName("id").
type mux struct {
	router *httprouter.Router
	auth   authenticator
	routes []route // what is mounted, for tests and the auth audit
}

type route struct {
	method, path string
	public       bool
}

func newMux(token secret.Secret, origins []string, log *slog.Logger) *mux {
	r := httprouter.New()
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, p any) {
		// A bug in one handler answers 500 and is logged; the daemon stays up.
		log.Error("handler panicked", "method", req.Method, "path", req.URL.Path, "panic", fmt.Sprint(p))
		writeError(w, http.StatusInternalServerError, "internal", "internal error")
	}
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleOPTIONS = false
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such route")
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this route")
	})
	auth := newAuthenticator(token)
	auth.origins = origins
	return &mux{router: r, auth: auth}
}

func (m *mux) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.router.ServeHTTP(w, r) }

// public mounts h with no authentication. Bodies are capped at 1 MiB
// (reading more fails with *http.MaxBytesError: answer 413).
func (m *mux) public(method, path string, h http.Handler) error {
	return m.mount(route{method, path, true}, limitBody(h))
}

// private mounts h behind the API token (Bearer or X-API-Key).
func (m *mux) private(method, path string, h http.Handler) error {
	return m.mount(route{method, path, false}, m.auth.require(limitBody(h)))
}

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

func limitBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxBodyBytes {
			writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large", "request body over 1 MiB")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		h.ServeHTTP(w, r)
	})
}

// authenticator checks the API token in constant time. Comparing SHA-256
// digests keeps the comparison constant-time in the token's length too.
type authenticator struct {
	enabled bool
	digest  [32]byte
	// origins are the browser origins allowed to send writes besides the
	// host's own (server.allowed_origins).
	origins []string
}

func newAuthenticator(token secret.Secret) authenticator {
	if token.IsZero() {
		return authenticator{}
	}
	return authenticator{enabled: true, digest: sha256.Sum256([]byte(token.Reveal()))}
}

// check reports whether presented is the token. An empty presented token
// is never accepted.
func (a authenticator) check(presented string) bool {
	if !a.enabled {
		return true
	}
	if presented == "" {
		return false
	}
	d := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(d[:], a.digest[:]) == 1
}

var errNoToken = errors.New("missing or wrong API token")

// tokenFrom reads the token from Authorization: Bearer or X-API-Key.
func tokenFrom(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		return ""
	}
	return r.Header.Get("X-API-Key")
}

// require admits a request with the token, and refuses writes a browser
// sends from a foreign page. Without that check, with no token (the
// default on loopback), any website could make its visitor's browser run
// agents here: a form post or a no-cors fetch needs no CORS preflight.
// Browsers always send Origin on such requests; other clients send none.
func (a authenticator) require(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.enabled && !a.check(tokenFrom(r)) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="axocoatl"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", errNoToken.Error())
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := checkOrigin(r, a.origins); err != nil {
				writeError(w, http.StatusForbidden, "forbidden", err.Error())
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
