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
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
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
}

// Route describes one guarded route.
type Route struct {
	Public       bool  // no token needed
	MaxBodyBytes int64 // zero: DefaultMaxBodyBytes
	// TooLarge answers a declared body over MaxBodyBytes. Zero: 413.
	TooLarge http.HandlerFunc
}

// Guard applies Options to requests. It is safe for concurrent use.
type Guard struct {
	token        bool
	digest       [32]byte
	origins      []pattern
	hostCheck    bool
	publicHosts  []string // lower-case host[:port] and host of PublicURL
	publicURL    string
	bodyTimeout  time.Duration
	writeTimeout time.Duration
	failures     *failureLimiter
}

// New returns a Guard. Invalid AllowedOrigins entries are an error (see
// ValidateOrigins); the guard is still returned and ignores them, so a
// caller that cannot fail still fails closed.
func New(o Options) (*Guard, error) {
	g := &Guard{
		hostCheck:    o.Token.IsZero(),
		publicURL:    strings.TrimRight(o.PublicURL, "/"),
		bodyTimeout:  o.BodyTimeout,
		writeTimeout: o.WriteTimeout,
	}
	if g.bodyTimeout == 0 {
		g.bodyTimeout = DefaultBodyTimeout
	}
	if g.writeTimeout == 0 {
		g.writeTimeout = DefaultWriteTimeout
	}
	if !o.Token.IsZero() {
		g.token = true
		g.digest = sha256.Sum256([]byte(o.Token.Reveal()))
		g.failures = newFailureLimiter(o.Failures, o.Logger)
	}
	if u, err := url.Parse(o.PublicURL); err == nil && u.Host != "" {
		g.publicHosts = append(g.publicHosts, strings.ToLower(u.Host), strings.ToLower(u.Hostname()))
	}
	var errs []error
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ArmBodyDeadline(w, r, g.bodyTimeout)
		if status, code, msg := g.Check(r, rt.Public); status != 0 {
			if status == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", code)
				code = "too_many_requests"
			}
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="axocoatl"`)
			}
			jsonio.WriteError(w, status, code, msg)
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
		if g.writeTimeout < 0 {
			h.ServeHTTP(w, r)
			return
		}
		dw := newDeadlineWriter(w, g.writeTimeout)
		h.ServeHTTP(dw, r)
		dw.finish()
	})
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
// the code is the Retry-After value in seconds.
func (g *Guard) Check(r *http.Request, public bool) (status int, code, msg string) {
	if !g.HostAllowed(r.Host) {
		return http.StatusForbidden, "forbidden", fmt.Sprintf(
			"host %s is not a name of this server (set server.public_url to it, or server.api_token)", jsonio.Quote(r.Host))
	}
	if !public && g.token {
		client := clientOf(r)
		if wait := g.failures.blocked(client); wait > 0 {
			return http.StatusTooManyRequests, fmt.Sprint(int((wait + time.Second - 1) / time.Second)),
				"too many wrong API tokens from this client; retry later"
		}
		if presented := TokenFrom(r); !g.TokenOK(presented) {
			if presented != "" { // a guess; a missing token is not
				g.failures.fail(client)
			}
			return http.StatusUnauthorized, "unauthorized", "missing or wrong API token"
		}
	}
	if needsOriginCheck(r) {
		if err := g.OriginAllowed(r); err != nil {
			return http.StatusForbidden, "forbidden", err.Error()
		}
	}
	return 0, "", ""
}

// needsOriginCheck: writes (a form post or a no-cors fetch needs no CORS
// preflight) and WebSocket upgrades (not covered by CORS at all). Plain
// reads are left to CORS: the browser does not let a foreign page read them.
func needsOriginCheck(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions {
		return true
	}
	return r.Header.Get("Upgrade") != ""
}

// TokenOK reports whether presented is the token (always true without one).
// An empty presented token is never accepted. Comparing SHA-256 digests
// keeps the comparison constant-time in the token's length too.
func (g *Guard) TokenOK(presented string) bool {
	if !g.token {
		return true
	}
	if presented == "" {
		return false
	}
	d := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(d[:], g.digest[:]) == 1
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
