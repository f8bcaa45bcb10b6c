// Package httpguard is the one HTTP guard every door of axocoatl uses: the
// library's modules, the HTTP API of package httpapi among them, through
// Engine.GuardHTTP. JSON I/O is in jsonio, URL redaction in redact.
// It checks, in order: the Host (against DNS rebinding, when no token is
// set), the API token (constant time, with failed guesses slowed per
// client), the browser Origin of writes and WebSocket upgrades, and bounds
// the request body (size and read deadline) and each response write
// (deadline), so that no client can hold a handler or its memory.
package httpguard

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/internal/jsonio"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Defaults for zero Options and Route fields.
const (
	DefaultBodyTimeout  = 30 * time.Second
	DefaultWriteTimeout = 30 * time.Second
	DefaultMaxBodyBytes = 1 << 20
	// MinTokenLength is the shortest API token a config may set: shorter
	// ones are guessable at the rate an HTTP server answers.
	MinTokenLength = 16
)

// Options configure a Guard; see axocoatl.HTTPOptions, which mirrors them.
type Options struct {
	PublicURL      string
	Token          secret.Secret
	AllowedOrigins []string
	BodyTimeout    time.Duration // zero: DefaultBodyTimeout; negative: none
	WriteTimeout   time.Duration // zero: DefaultWriteTimeout; negative: none
	Logger         *slog.Logger  // zero: discard
	// Failures bounds wrong tokens per client. Zero: DefaultFailureLimit.
	Failures FailureLimit
	// Credentials are scoped static tokens, beside Token (which carries
	// every scope).
	Credentials []Credential
	// OAuth, when set, also admits JWT access tokens of its issuer.
	OAuth *OAuth
	// Bind attaches the principal the guard found to the request it hands
	// on (the root package's Identity). Zero: the request is handed on
	// as it is.
	Bind func(*http.Request, *Principal) *http.Request
	// Tracing makes a server span of each request [Guard.Wrap] serves.
	// Zero: none.
	Tracing Tracing
}

// Route describes one guarded route.
type Route struct {
	// Scope is what the route asks of its caller (ScopeRead…); "" asks
	// for ScopeAdmin. Public (or Scope ScopePublic) asks for nothing.
	Scope        string
	Public       bool  // no token needed
	MaxBodyBytes int64 // zero: DefaultMaxBodyBytes
	// TooLarge answers a declared body over MaxBodyBytes. Zero: 413.
	TooLarge http.HandlerFunc
}

// Guard applies Options to requests. It is safe for concurrent use.
type Guard struct {
	log          *slog.Logger
	jwksLogged   atomic.Int64 // unix ms of the last "key set unavailable" log line
	tracing      Tracing
	token        bool // some credential is required on non-public routes
	creds        []credential
	oauth        *Verifier
	bind         func(*http.Request, *Principal) *http.Request
	origins      []pattern
	hostCheck    bool
	publicHosts  []string // lower-case host[:port] and host of PublicURL
	publicURL    string
	bodyTimeout  time.Duration
	writeTimeout time.Duration
	// idle cuts keep-alive connections left with an unsent answer (nil
	// without a write timeout).
	idle     *IdleCutter
	failures *failureLimiter
}

// New returns a Guard. Invalid AllowedOrigins entries are an error (see
// ValidateOrigins); the guard is still returned and ignores them, so a
// caller that cannot fail still fails closed.
func New(o Options) (*Guard, error) {
	g := &Guard{
		hostCheck:    true,
		publicURL:    strings.TrimRight(o.PublicURL, "/"),
		bodyTimeout:  o.BodyTimeout,
		writeTimeout: o.WriteTimeout,
		tracing:      o.Tracing,
	}
	if g.tracing.Tracer == nil || g.tracing.Propagator == nil {
		g.tracing.On = nil
	}
	if g.bodyTimeout == 0 {
		g.bodyTimeout = DefaultBodyTimeout
	}
	if g.writeTimeout == 0 {
		g.writeTimeout = DefaultWriteTimeout
	}
	if g.writeTimeout > 0 {
		g.idle = NewIdleCutter(g.writeTimeout)
	}
	g.log = o.Logger
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	g.creds = newCredentials(o.Token, o.Credentials)
	if o.OAuth != nil {
		v, err := NewVerifier(*o.OAuth)
		if err != nil {
			errs = append(errs, fmt.Errorf("oauth: %w", err))
			// Fail closed: a guard asked for OAuth that cannot verify
			// still asks for credentials.
		} else {
			g.oauth = v
		}
	}
	if len(g.creds) > 0 || o.OAuth != nil {
		g.token = true
		g.hostCheck = false
		g.failures = newFailureLimiter(o.Failures, o.Logger)
	}
	g.bind = o.Bind
	if u, err := url.Parse(o.PublicURL); err == nil && u.Host != "" {
		g.publicHosts = append(g.publicHosts, strings.ToLower(u.Host), strings.ToLower(u.Hostname()))
	}
	for i, s := range o.AllowedOrigins {
		p, err := parsePattern(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("allowed_origins[%d]: %w", i, err))
			continue
		}
		g.origins = append(g.origins, p)
	}
	return g, errors.Join(errs...)
}

// ValidateOrigins checks allowed_origins entries: one *cfgerr.Error keyed
// allowed_origins[i] per bad one (joined), naming the accepted forms.
func ValidateOrigins(origins []string) error {
	var errs []error
	for i, s := range origins {
		if _, err := parsePattern(s); err != nil {
			errs = append(errs, cfgerr.Errorf(fmt.Sprintf("allowed_origins[%d]", i), "%v", err))
		}
	}
	return errors.Join(errs...)
}

// PublicURL is the configured public base URL without a trailing slash, or "".
func (g *Guard) PublicURL() string { return g.publicURL }

// Wrap guards h.
func (g *Guard) Wrap(rt Route, h http.Handler) http.Handler {
	limit := rt.MaxBodyBytes
	if limit == 0 {
		limit = DefaultMaxBodyBytes
	}
	scope := rt.Scope
	if rt.Public {
		scope = ScopePublic
	}
	serve := func(w http.ResponseWriter, r *http.Request) {
		ArmBodyDeadline(w, r, g.bodyTimeout)
		r, ok := g.Authorize(w, r, scope)
		if !ok {
			return
		}
		if r.ContentLength > limit {
			if rt.TooLarge != nil {
				rt.TooLarge(w, r)
				return
			}
			jsonio.WriteError(w, http.StatusRequestEntityTooLarge, "payload_too_large",
				fmt.Sprintf("request body of %d bytes is over the %s limit", r.ContentLength, jsonio.Bytes(limit)))
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		if sw, ok := w.(*statusWriter); ok {
			sw.req = r // its span reads the route a mux under h matched
		}
		if g.writeTimeout < 0 {
			h.ServeHTTP(w, r)
			return
		}
		dw := newDeadlineWriter(w, g.writeTimeout)
		h.ServeHTTP(dw, r)
		dw.finish()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.tracing.On != nil && g.tracing.On() {
			g.serveTraced(w, r, serve)
			return
		}
		serve(w, r)
	})
}

// Authorize applies the Host, credential, scope and Origin rules to r for
// a route asking for scope. It returns r with the caller's principal bound
// (Options.Bind) and true, or answers r (401 with WWW-Authenticate, 403,
// 429 with Retry-After) and returns false.
func (g *Guard) Authorize(w http.ResponseWriter, r *http.Request, scope string) (*http.Request, bool) {
	p, f := g.authorize(r, scope)
	if f != nil {
		code := f.code
		switch f.status {
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			w.Header().Set("Retry-After", fmt.Sprint(f.retryAfterSecs))
		case http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", g.challenge(r, f))
		case http.StatusForbidden:
			if f.bearerErr != "" {
				w.Header().Set("WWW-Authenticate", g.challenge(r, f))
			}
		}
		jsonio.WriteError(w, f.status, code, f.msg)
		return r, false
	}
	if p != nil && g.bind != nil {
		r = g.bind(r, p)
	}
	return r, true
}

// ArmBodyDeadline bounds reading r's body by timeout (none when it is not
// positive or r has no body). Every request with a body gets it, not only
// those whose handler reads it: net/http drains a small unread body before
// writing any answer (a 401, a 404), so without a deadline a client
// declaring a body it never sends holds the connection. net/http clears the
// read deadline once the body is read to its end, so a run after the body
// is not cut.
func ArmBodyDeadline(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
	if r.ContentLength == 0 || timeout <= 0 {
		return
	}
	if s := readDeadlineSetter(w); s != nil {
		_ = s.SetReadDeadline(time.Now().Add(timeout))
	}
}

// Check applies the Host, token and Origin rules to r. It returns 0 when r
// passes, else the status, error code and message to answer with; for 429
// and 503 the code is the Retry-After value in seconds. A route that is not public
// asks for ScopeAdmin here; Authorize takes the scope.
func (g *Guard) Check(r *http.Request, public bool) (status int, code, msg string) {
	scope := ""
	if public {
		scope = ScopePublic
	}
	if _, f := g.authorize(r, scope); f != nil {
		if f.retryAfterSecs > 0 {
			return f.status, fmt.Sprint(f.retryAfterSecs), f.msg
		}
		return f.status, f.code, f.msg
	}
	return 0, "", ""
}

func (g *Guard) authorize(r *http.Request, scope string) (*Principal, *authFailure) {
	if !g.HostAllowed(r.Host) {
		return nil, &authFailure{status: http.StatusForbidden, code: "forbidden", msg: fmt.Sprintf(
			"host %s is not a name of this server (set server.public_url to it, or server.api_token)", jsonio.Quote(r.Host))}
	}
	var p *Principal
	if g.token {
		presented := TokenFrom(r)
		if scope == ScopePublic {
			// A public route needs nothing, but a caller who shows valid
			// credentials is known by them (an agent card lists only the
			// agents its token sees). Wrong ones count as failures, so a
			// public route is no oracle for guessing, and a client past
			// the bound is anonymous here.
			if client := clientOf(r); presented != "" && g.failures.blocked(client) == 0 {
				var err error
				if p, err = g.identify(r, presented); p == nil && !errors.Is(err, ErrJWKS) {
					g.failures.fail(client)
				}
			}
		} else {
			client := clientOf(r)
			if wait := g.failures.blocked(client); wait > 0 {
				return nil, &authFailure{status: http.StatusTooManyRequests, code: "too_many_requests",
					msg: "too many wrong API tokens from this client; retry later", retryAfterSecs: int((wait + time.Second - 1) / time.Second)}
			}
			if presented == "" {
				return nil, &authFailure{status: http.StatusUnauthorized, code: "unauthorized", msg: "missing or wrong API token"}
			}
			var err error
			if p, err = g.identify(r, presented); p == nil && errors.Is(err, ErrJWKS) {
				// Our issuer's key set is out of reach: the token may be
				// good, so this is not the client's failure (counting it
				// would lock out every client of an issuer's outage).
				g.logJWKS(err)
				return nil, &authFailure{status: http.StatusServiceUnavailable, code: "unavailable",
					msg:            "the access token cannot be checked now: the token issuer's key set is out of reach; retry later",
					retryAfterSecs: int((g.oauth.cfg.MinRefresh + time.Second - 1) / time.Second)}
			}
			if p == nil {
				g.failures.fail(client)
				f := &authFailure{status: http.StatusUnauthorized, code: "unauthorized", msg: "missing or wrong API token"}
				if err != nil {
					f.bearerErr, f.bearerDesc = "invalid_token", err.Error()
					f.msg = "access token refused: " + err.Error()
				}
				return nil, f
			}
			if !HasScope(p.Scopes, scope) {
				need := scope
				if need == "" {
					need = ScopeAdmin
				}
				f := &authFailure{status: http.StatusForbidden, code: "forbidden", scope: need,
					msg: fmt.Sprintf("%s may not do this: it needs scope %s", jsonio.Quote(p.Name), need)}
				if g.oauth != nil {
					f.bearerErr = "insufficient_scope"
				}
				return nil, f
			}
		}
	}
	if needsOriginCheck(r) {
		if err := g.OriginAllowed(r); err != nil {
			return nil, &authFailure{status: http.StatusForbidden, code: "forbidden", msg: err.Error()}
		}
	}
	return p, nil
}

// identify names the caller presented credentials belong to: a static
// token, else (with OAuth) a JWT, whose refusal is the error. The error
// says what is wrong with the token, never what it contains.
func (g *Guard) identify(r *http.Request, presented string) (*Principal, error) {
	if p := g.lookup(presented); p != nil {
		return p, nil
	}
	if g.oauth == nil || !LooksLikeJWT(presented) {
		return nil, nil
	}
	return g.oauth.Verify(r.Context(), presented)
}

// logJWKS logs why the issuer's key set is out of reach, at most once per
// MinRefresh (the client is told only that it is: the cause may name
// internal addresses).
func (g *Guard) logJWKS(err error) {
	now, last := time.Now().UnixMilli(), g.jwksLogged.Load()
	if now-last < g.oauth.cfg.MinRefresh.Milliseconds() || !g.jwksLogged.CompareAndSwap(last, now) {
		return
	}
	g.log.Warn("OAuth: the token issuer's key set cannot be fetched; requests whose key is not cached are answered 503", "error", err)
}

// Verifier is the OAuth verifier, or nil without OAuth.
func (g *Guard) Verifier() *Verifier { return g.oauth }

// needsOriginCheck: writes (a form post or a no-cors fetch needs no CORS
// preflight) and WebSocket upgrades (not covered by CORS at all). Plain
// reads are left to CORS: the browser does not let a foreign page read them.
func needsOriginCheck(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions {
		return true
	}
	return r.Header.Get("Upgrade") != ""
}

// TokenOK reports whether presented is a configured static token (always
// true without any credentials). An empty presented token is never
// accepted. Comparing SHA-256 digests keeps the comparison constant-time
// in the token's length too.
func (g *Guard) TokenOK(presented string) bool {
	if !g.token {
		return true
	}
	return g.lookup(presented) != nil
}

// TokenRequired reports whether a token is configured.
func (g *Guard) TokenRequired() bool { return g.token }

// TokenFrom reads the token from "Authorization: Bearer" or X-API-Key.
func TokenFrom(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		return ""
	}
	return r.Header.Get("X-API-Key")
}

// HostAllowed defends a token-less server against DNS rebinding: a page at
// http://attacker.example:PORT whose name is then re-pointed at this
// server's address is same-origin with itself, so Origin checks pass and
// the page could read every answer. Such a server answers only to names
// that are its own: IP literals (no DNS involved), localhost and
// *.localhost (browsers resolve those themselves), the PublicURL host and
// the hosts of AllowedOrigins. This holds whatever address it listens on.
func (g *Guard) HostAllowed(host string) bool {
	if !g.hostCheck || host == "" {
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
	lower := strings.ToLower(host)
	for _, h := range g.publicHosts {
		if h == lower || h == name {
			return true
		}
	}
	for _, p := range g.origins {
		if p.matchHost(name) {
			return true
		}
	}
	return false
}

// OriginAllowed admits requests from non-browser clients (no Origin, no
// Sec-Fetch-Site), from the server's own pages, and from AllowedOrigins.
func (g *Guard) OriginAllowed(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		switch r.Header.Get("Sec-Fetch-Site") {
		case "", "same-origin", "none":
			return nil
		}
		return errors.New("a cross-site browser request without Origin is refused")
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		// Includes "null", sent by sandboxed and file: pages.
		return fmt.Errorf("origin %s is not allowed (see server.allowed_origins)", jsonio.Quote(origin))
	}
	// Same host: the page was served by whatever serves us. The scheme is
	// not compared: a TLS-terminating proxy may sit in between.
	if strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	for _, p := range g.origins {
		if p.matchOrigin(u) {
			return nil
		}
	}
	return fmt.Errorf("origin %s may not call %s (see server.allowed_origins)", jsonio.Quote(origin), jsonio.Quote(r.Host))
}

// pattern is one allowed_origins entry: an optional scheme, a host glob
// (path.Match syntax, so "*" matches within a name, never a "/") and an
// optional port glob. With a scheme the entry is an origin: without a port
// it means the scheme's default port. Without a scheme it is a host
// pattern: any scheme, and any port unless one is given.
type pattern struct {
	scheme string // "", "http" or "https"
	host   string // lower case glob
	port   string // glob or "" for any
}

func parsePattern(s string) (pattern, error) {
	bad := fmt.Errorf("%q must be an origin (https://app.example.com), a wildcard origin (https://*.example.com, http://localhost:*) or a host pattern (app.example.com, *.example.com)", s)
	var p pattern
	rest := strings.ToLower(strings.TrimRight(s, "/"))
	if scheme, after, ok := strings.Cut(rest, "://"); ok {
		if scheme != "http" && scheme != "https" {
			return p, bad
		}
		p.scheme, rest = scheme, after
	}
	if rest == "" || strings.ContainsAny(rest, "/?#@ \\") {
		return p, bad
	}
	p.host = rest
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && !strings.HasSuffix(rest, "]") && strings.Count(rest, ":") == 1 || i > 0 && rest[i-1] == ']' {
		p.host, p.port = rest[:i], rest[i+1:]
		if p.port == "" {
			return p, bad
		}
	}
	if strings.HasPrefix(p.host, "[") && strings.HasSuffix(p.host, "]") { // an IPv6 literal
		p.host = p.host[1 : len(p.host)-1]
	}
	if p.host == "" {
		return p, bad
	}
	if _, err := path.Match(p.host, ""); err != nil {
		return p, bad
	}
	if _, err := path.Match(p.port, ""); err != nil {
		return p, bad
	}
	return p, nil
}

func (p pattern) matchHost(name string) bool {
	ok, _ := path.Match(p.host, name)
	return ok
}

func (p pattern) matchOrigin(u *url.URL) bool {
	if p.scheme != "" && p.scheme != u.Scheme {
		return false
	}
	if !p.matchHost(strings.ToLower(u.Hostname())) {
		return false
	}
	defaultPort := map[string]string{"http": "80", "https": "443"}
	want := p.port
	if want == "" {
		if p.scheme == "" {
			return true
		}
		want = defaultPort[p.scheme]
	}
	port := u.Port()
	if port == "" {
		port = defaultPort[u.Scheme]
	}
	ok, _ := path.Match(want, port)
	return ok
}

// clientOf is the client's address without the port. Behind a reverse
// proxy every client shares the proxy's address: the limiter then slows
// the proxy as a whole, which fails safe.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
