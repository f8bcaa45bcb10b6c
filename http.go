package axocoatl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
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
	// Tokens are scoped static tokens beside APIToken (which carries every
	// scope): each names its caller, what it may do and which agents it
	// sees. Zero: none.
	Tokens []Token
	// OAuth, when set, also admits JWT access tokens of one authorization
	// server: the doors are then OAuth protected resources (RFC 9728
	// metadata, WWW-Authenticate on 401). Zero: no JWTs.
	OAuth *OAuthOptions
}

// Token is one scoped static token (server.tokens).
type Token struct {
	// Name names the caller in logs, events and verdicts. Required, unique.
	Name string `yaml:"name"`
	// Token is the secret, sent as "Authorization: Bearer" or X-API-Key;
	// at least 16 characters.
	Token secret.Secret `yaml:"token"`
	// Scopes are what it may do: read, execute, approve, admin. At least one.
	Scopes []Scope `yaml:"scopes"`
	// Agents are path.Match globs ("support-*") of the agents it sees and
	// runs, on every door. Zero: every agent.
	Agents []string `yaml:"agents"`
}

// OAuthOptions make the doors accept JWT access tokens (server.auth.oauth).
type OAuthOptions struct {
	// Issuer is the authorization server; a token's iss must equal it.
	Issuer string `yaml:"issuer"`
	// Audience must be among a token's aud (usually the public URL, or
	// the public URL + "/mcp" for MCP clients that send a resource).
	Audience string `yaml:"audience"`
	// JWKSURL is the issuer's key set. Zero: discovered from the issuer's
	// metadata (RFC 8414, then OpenID Connect discovery).
	JWKSURL string `yaml:"jwks_url"`
	// Scopes maps a token's scope values to scopes here ("mcp:tools":
	// [read, execute]). Zero: read, execute, approve and admin map to
	// themselves and other values to nothing.
	Scopes map[string][]Scope `yaml:"scopes"`
	// Agents are the agent globs of every JWT caller. Zero: every agent.
	Agents []string `yaml:"agents"`
	// ClockSkew is allowed on exp and nbf. Zero: 60s.
	ClockSkew time.Duration `yaml:"clock_skew"`
	// JWKSRefresh is how long a fetched key set is used. Zero: 1h.
	JWKSRefresh time.Duration `yaml:"jwks_refresh"`
	// JWKSMinRefresh is the least time between two fetches of the key set
	// (a token naming an unknown kid fetches it early). Zero: 10s.
	JWKSMinRefresh time.Duration `yaml:"jwks_min_refresh"`
	// JWKSTimeout bounds one fetch of the key set or metadata. Zero: 10s.
	JWKSTimeout time.Duration `yaml:"jwks_timeout"`
	// MaxJWKSBytes bounds the key set and metadata documents. Zero: 256 KiB.
	MaxJWKSBytes int64 `yaml:"max_jwks_bytes"`
}

// ValidateTokens checks scoped tokens: names set, unique and not
// "api_token"; tokens of at least 16 characters, without whitespace, each
// unlike every other and the api token; scopes known, at least one; agent
// globs valid. Errors are keyed tokens[i].field.
func ValidateTokens(apiToken secret.Secret, ts []Token) error {
	return httpguard.ValidateCredentials(credentials(ts), apiToken)
}

// Validate checks the issuer and jwks_url (absolute http(s) URLs), the
// audience (set), the scope map (known scopes), the agent globs and the
// bounds (not negative). A nil OAuthOptions is valid.
func (o *OAuthOptions) Validate() error {
	if o == nil {
		return nil
	}
	return o.guard().Validate()
}

func (o *OAuthOptions) guard() *httpguard.OAuth {
	if o == nil {
		return nil
	}
	g := &httpguard.OAuth{Issuer: o.Issuer, Audience: o.Audience, JWKSURL: o.JWKSURL, Agents: o.Agents,
		ClockSkew: o.ClockSkew, Refresh: o.JWKSRefresh, MinRefresh: o.JWKSMinRefresh, Timeout: o.JWKSTimeout, MaxJWKSBody: o.MaxJWKSBytes}
	if len(o.Scopes) > 0 {
		g.ScopeMap = map[string][]string{}
		for k, ss := range o.Scopes {
			for _, s := range ss {
				g.ScopeMap[k] = append(g.ScopeMap[k], string(s))
			}
		}
	}
	return g
}

func credentials(ts []Token) []httpguard.Credential {
	out := make([]httpguard.Credential, 0, len(ts))
	for _, t := range ts {
		c := httpguard.Credential{Name: t.Name, Token: t.Token, Agents: t.Agents}
		for _, s := range t.Scopes {
			c.Scopes = append(c.Scopes, string(s))
		}
		out = append(out, c)
	}
	return out
}

// HTTPRoute describes one route for [Engine.GuardHTTP].
type HTTPRoute struct {
	// Scope is what the route asks of its caller's credentials (see
	// [Scope]); the zero [ScopeToken] asks for [ScopeAdmin].
	Scope Scope
	// Public routes need no token (health, agent cards, a dashboard page),
	// as Scope [ScopePublic] does. The Host and Origin checks apply to
	// every route.
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

// Scope is what a route asks of its caller, and what a caller's
// credentials carry ([Identity].Scopes): [ScopeRead], [ScopeExecute],
// [ScopeApprove], [ScopeAdmin]. The zero value is the safe one.
type Scope string

const (
	// ScopeToken (the zero value) asks for [ScopeAdmin]: what the
	// api_token carries. Routes declare a finer scope where one fits.
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
// Host check, the credentials and the scope the route asks for (the
// caller's [Identity] then on the request's context), the Origin check for writes, the body bound and
// read deadline, and per-write deadlines. Every module serves its routes
// through it, and a host can guard its own routes the same way.
func (e *Engine) GuardHTTP(rt HTTPRoute, h http.Handler) http.Handler {
	return e.guard.Wrap(httpguard.Route{Scope: string(rt.Scope), Public: rt.Public, MaxBodyBytes: rt.MaxBodyBytes, TooLarge: rt.TooLarge}, h)
}

// ConnState is the hook a host sets as its [http.Server]'s ConnState
// (srv.ConnState = eng.ConnState) so that [HTTPOptions].WriteTimeout also
// holds for an answer that fit in the kernel's send buffer: such a write
// succeeds at once and no deadline sees the client that never reads it,
// so its connection (a goroutine and its buffers) would wait for the
// server's IdleTimeout. A connection left idle with bytes unsent is
// closed after WriteTimeout once its client takes no byte (Linux; other
// systems cannot tell, and leave it to IdleTimeout). [Engine.Close] ends
// the pending checks.
func (e *Engine) ConnState(conn net.Conn, s http.ConnState) { e.guard.ConnState(conn, s) }

// ConfigureServer sets srv up to serve the Engine's doors: it sets
// [Engine.ConnState] as srv's ConnState hook (calling a hook srv already
// had after it), and makes [http.Server.Shutdown] close the connections
// that were accepted but have sent no request at once, instead of waiting
// 5 s for each as net/http does (the spare connection a client's
// transport dialed and left unused, a browser's preconnect: one of them
// held a daemon's shutdown for its whole 5 s). net/http would serve no
// request on them after Shutdown has begun anyway.
// Call it once per server, before it serves.
func (e *Engine) ConfigureServer(srv *http.Server) {
	httpguard.ChainConnState(srv, e.guard.ConnState)
	httpguard.NewSilentConns(srv)
}

// HTTPWriteTimeout is the bound of each response write that [HTTPOptions]
// gives, its default applied (zero: none); a door that writes outside
// the guard's writer (a WebSocket frame) bounds its writes by it too.
func (e *Engine) HTTPWriteTimeout() time.Duration { return e.guard.WriteTimeout() }

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
	return errors.Join(ValidateTokens(o.APIToken, o.Tokens), o.OAuth.Validate(), httpguard.ValidateOrigins(o.AllowedOrigins))
}

// CheckHTTP applies the Engine's Host, token and Origin rules to r and, when
// r fails them, answers it and returns false; a route that is not public
// asks for [ScopeAdmin] here ([Engine.AuthorizeHTTP] takes the scope and
// hands on the caller's [Identity]). For routes that cannot be wrapped by
// [Engine.GuardHTTP] as a whole (a WebSocket that also accepts its token
// in the query).
func (e *Engine) CheckHTTP(w http.ResponseWriter, r *http.Request, public bool) bool {
	status, code, msg := e.guard.Check(r, public)
	if status == 0 {
		return true
	}
	switch status {
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", code)
		code = "too_many_requests"
	case http.StatusServiceUnavailable: // the OAuth issuer's key set is out of reach
		w.Header().Set("Retry-After", code)
		code = "unavailable"
	}
	jsonio.WriteError(w, status, code, msg)
	return false
}

// AuthorizeHTTP is [Engine.CheckHTTP] for a route asking for scope: it
// returns r with the caller's [Identity] on its context and true, or
// answers r (401 with WWW-Authenticate, 403, 429) and returns false.
func (e *Engine) AuthorizeHTTP(w http.ResponseWriter, r *http.Request, scope Scope) (*http.Request, bool) {
	return e.guard.Authorize(w, r, string(scope))
}

// bindIdentity is the guard's Bind: the principal as the root [Identity].
func bindIdentity(r *http.Request, p *httpguard.Principal) *http.Request {
	return r.WithContext(WithIdentity(r.Context(), identityOf(p)))
}

// WellKnownProtectedResource is where [Engine.ServeProtectedResource]
// answers: the OAuth protected resource metadata (RFC 9728) of the host's
// root, and under it that of a door at a path (/mcp).
const WellKnownProtectedResource = httpguard.WellKnownResource

// AuthRequired reports whether the doors ask for credentials (an
// api_token, scoped tokens or OAuth).
func (e *Engine) AuthRequired() bool { return e.guard.TokenRequired() }

// ServeProtectedResource answers GET [WellKnownProtectedResource] and
// GET [WellKnownProtectedResource]/<path> with the resource's metadata
// (RFC 9728: resource, authorization_servers, scopes_supported,
// bearer_methods_supported) when [HTTPOptions].OAuth is set, else 404.
// The resource is [HTTPOptions].PublicURL (or the request's origin) plus
// the path after the well-known prefix.
func (e *Engine) ServeProtectedResource(w http.ResponseWriter, r *http.Request) {
	v := e.guard.Verifier()
	if v == nil {
		jsonio.WriteError(w, http.StatusNotFound, "not_found", "this server is not an OAuth protected resource (server.auth.oauth is not set)")
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, WellKnownProtectedResource)
	if i := strings.Index(r.URL.Path, WellKnownProtectedResource); i >= 0 {
		rest = r.URL.Path[i+len(WellKnownProtectedResource):]
	}
	base := e.guard.BaseURL(r)
	resource := base
	if rest != "" && rest != "/" {
		if u, err := url.Parse(base); err == nil && u.Path != "" && strings.HasPrefix(rest, u.Path) {
			rest = strings.TrimPrefix(rest, u.Path)
		}
		resource = base + rest
	}
	w.Header().Set("Cache-Control", "max-age=300")
	jsonio.WriteJSON(w, http.StatusOK, map[string]any{
		"resource":                 resource,
		"authorization_servers":    []string{v.Issuer()},
		"scopes_supported":         v.ScopesSupported(),
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "axocoatl",
	})
}

// OAuthEndpoints are the authorization and token endpoints of the
// [HTTPOptions].OAuth issuer, from its metadata (fetched once, bounded),
// for cards that say how to get a token; "" where unknown or without OAuth.
func (e *Engine) OAuthEndpoints(ctx context.Context) (authURL, tokenURL string) {
	if v := e.guard.Verifier(); v != nil {
		return v.Endpoints(ctx)
	}
	return "", ""
}
