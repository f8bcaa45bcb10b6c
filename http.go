package axocoatl

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/httpguard"
	"github.com/axocoatl/axocoatl-go/internal/jsonio"
	"github.com/axocoatl/axocoatl-go/secret"
)

// HTTPOptions say how every door that the Engine's modules (and a host's own
// routes, through [Engine.GuardHTTP]) serve over HTTP is protected. They
// belong to the Engine, not to each module, so that every door answers a
// request the same way. The zero value guards a local, token-less setup:
// no token, browsers only from the host's own pages, and only Host names
// that are this machine's (against DNS rebinding).
type HTTPOptions struct {
	// PublicURL is the absolute base URL clients reach the host's root at
	// (scheme://host[:port][/path]). Cards and other absolute URLs are built
	// from it plus the path prefix a module is mounted under, and its host
	// passes the Host check. Zero: derived from each request's Host.
	PublicURL string
	// APIToken, when set, is required on every route that is not public, as
	// "Authorization: Bearer <token>" or "X-API-Key: <token>", compared in
	// constant time. Zero: no token (and the Host check is on).
	APIToken secret.Secret
	// AllowedOrigins are browser origins, besides the host's own, whose pages
	// may send writes, and (without a token) Host names that are accepted.
	// Forms: "https://app.example.com", "https://*.example.com" (any
	// subdomain, that scheme), "http://localhost:*" (any port). Zero: the
	// host's own pages only.
	AllowedOrigins []string
	// BodyTimeout bounds reading one request body, so that a client trickling
	// bytes cannot hold a handler. Zero: 30s; negative: no bound.
	BodyTimeout time.Duration
	// WriteTimeout bounds each write of a response: a client that stops
	// reading is cut after it, and its memory freed. Zero: 30s; negative:
	// no bound.
	WriteTimeout time.Duration
	// MaxAuthFailures bounds wrong tokens per client and 10 s window: past
	// it the client's requests to token routes get 429 with Retry-After
	// until the window ends (the token is not even checked), with one log
	// line per window. Requests without a token do not count. Zero: 10;
	// negative: no bound.
	MaxAuthFailures int
}

// HTTPRoute describes one route for [Engine.GuardHTTP].
type HTTPRoute struct {
	// Public routes need no token (health, agent cards, a dashboard page).
	// The Host and Origin checks apply to every route.
	Public bool
	// MaxBodyBytes bounds the request body: a larger declared body gets 413
	// at once, and reading past the bound fails with *http.MaxBytesError.
	// Zero: 1 MiB.
	MaxBodyBytes int64
	// TooLarge answers a request whose declared body is over MaxBodyBytes,
	// for protocols that must answer in their own shape (JSON-RPC over
	// HTTP answers 200 with an error). Zero: 413 with the JSON error.
	TooLarge http.HandlerFunc
}

// Scope is what a route asks of its caller. It is a field of its own, not a
// bool, so that finer scopes (read, execute, approve, admin) can be added per
// route; the zero value is the safe one.
type Scope string

const (
	// ScopeToken needs the API token when one is configured (the zero value).
	ScopeToken Scope = ""
	// ScopePublic needs no token (health, agent cards, the dashboard page).
	// The Host and Origin checks still apply.
	ScopePublic Scope = "public"
)

// Route is one HTTP door of a module, declared once: the module builds its
// own handler from its list, and a host composes the lists of its modules
// (config.Runtime.Routes, Mount) onto its router.
type Route struct {
	Method string
	// Pattern is the path in [net/http.ServeMux] syntax, relative to where
	// the module is mounted: {name} is one segment, {$} the end of the
	// path, and everything else is literal (a colon too: /a2a/message:send).
	Pattern string
	Scope   Scope
	// MaxBodyBytes bounds the request body. Zero: 1 MiB.
	MaxBodyBytes int64
}

// HTTPModule is a Module that serves HTTP: its ServeHTTP answers every one
// of its Routes, each behind the Engine's guard, once the Module is started.
type HTTPModule interface {
	Module
	http.Handler
	Routes() []Route
}

// GuardHTTP wraps h with the Engine's HTTP guard (see [HTTPOptions]): the
// Host check, the token, the Origin check for writes, the body bound and
// read deadline, and per-write deadlines. Every module serves its routes
// through it, and a host can guard its own routes the same way.
func (e *Engine) GuardHTTP(rt HTTPRoute, h http.Handler) http.Handler {
	return e.guard.Wrap(httpguard.Route{Public: rt.Public, MaxBodyBytes: rt.MaxBodyBytes, TooLarge: rt.TooLarge}, h)
}

// HTTP returns the Engine's HTTP options, for modules that build absolute
// URLs or check a token themselves (a WebSocket's ?token=).
func (e *Engine) HTTP() HTTPOptions { return e.httpOpts }

// Validate checks the options: PublicURL is an absolute http(s) URL without
// query or fragment, AllowedOrigins entries have an accepted form, and a
// token is at least 16 characters long.
func (o HTTPOptions) Validate() error {
	if o.PublicURL != "" {
		u, err := url.Parse(o.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("public_url %q must be an absolute http(s) URL", o.PublicURL)
		}
		if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("public_url %q must not have userinfo, a query or a fragment", o.PublicURL)
		}
	}
	if !o.APIToken.IsZero() && len(o.APIToken.Reveal()) < httpguard.MinTokenLength {
		return fmt.Errorf("api_token is %d characters long: use at least %d (for example the output of `openssl rand -hex 24`)",
			len(o.APIToken.Reveal()), httpguard.MinTokenLength)
	}
	return httpguard.ValidateOrigins(o.AllowedOrigins)
}

// CheckHTTP applies the Engine's Host, token and Origin rules to r and, when
// r fails them, answers it and returns false. For routes that cannot be
// wrapped by [Engine.GuardHTTP] as a whole (a WebSocket that also accepts
// its token in the query).
func (e *Engine) CheckHTTP(w http.ResponseWriter, r *http.Request, public bool) bool {
	status, code, msg := e.guard.Check(r, public)
	if status == 0 {
		return true
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", code)
		code = "too_many_requests"
	}
	jsonio.WriteError(w, status, code, msg)
	return false
}
