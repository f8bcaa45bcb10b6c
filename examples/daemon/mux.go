package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

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
	hosts  hostGuard
	// bodyTimeout bounds reading a request body (server.body_timeout).
	// Zero: DefaultBodyReadTimeout.
	bodyTimeout time.Duration
	routes      []route // what is mounted, for tests and the auth audit
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

func (m *mux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		// Bound the body for every request, not only in handlers that
		// read it: net/http drains a small unread body before writing
		// any answer (a 401, 403, 404), so without a deadline a client
		// declaring a body it never sends holds the connection for good.
		// net/http clears the deadline once the body is read to its end,
		// so a run after the body is not cut (TestRunOutlivesBodyTimeout).
		timeout := m.bodyTimeout
		if timeout <= 0 {
			timeout = DefaultBodyReadTimeout
		}
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
	}
	if !m.hosts.allows(r.Host) {
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf(
			"host %s is not a name of this daemon (set server.public_url to it, or server.api_token)", quote(r.Host)))
		return
	}
	m.router.ServeHTTP(w, r)
}

// hostGuard defends a daemon on loopback without a token against DNS
// rebinding: a page at http://attacker.example:PORT whose name is then
// re-pointed to 127.0.0.1 is same-origin with itself, so Origin checks
// pass and the page could read every answer. Such a daemon answers only
// to host names that are its own: IP literals (no DNS involved),
// localhost and *.localhost (browsers resolve those themselves), the host
// of server.public_url and server.allowed_origins' host patterns.
type hostGuard struct {
	on       bool
	names    []string // lower-case host[:port] of public_url
	patterns []string // allowed_origins without a scheme
}

func newHostGuard(s ServerConfig) hostGuard {
	if !s.APIToken.IsZero() || !isLoopback(s.Addr) {
		return hostGuard{}
	}
	g := hostGuard{on: true}
	if u, err := url.Parse(s.PublicURL); err == nil && u.Host != "" {
		g.names = append(g.names, strings.ToLower(u.Host), strings.ToLower(u.Hostname()))
	}
	for _, p := range s.AllowedOrigins {
		if !strings.Contains(p, "://") {
			g.patterns = append(g.patterns, strings.ToLower(p))
		}
	}
	return g
}

func (g hostGuard) allows(host string) bool {
	if !g.on || host == "" {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	if net.ParseIP(name) != nil || name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	host = strings.ToLower(host)
	if slices.Contains(g.names, host) || slices.Contains(g.names, name) {
		return true
	}
	for _, p := range g.patterns {
		if ok, _ := path.Match(p, host); ok {
			return true
		}
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

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
