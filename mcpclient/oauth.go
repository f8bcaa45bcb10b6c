package mcpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/secret"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// OAuth grants a server entry may use ([OAuthConfig].Grant).
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// MaxOAuthAllowHosts bounds [OAuthConfig].AllowHosts.
const MaxOAuthAllowHosts = 100

// DefaultRefreshEarly is how long before its expiry an access token is
// refreshed: calls made meanwhile carry the old, still valid token, so a
// refresh never fails a call in flight.
const DefaultRefreshEarly = time.Minute

// ErrNeedsLogin: the server wants an OAuth authorization code grant and no
// one has logged in (or the refresh token was refused): run
// `axocoatl mcp login <server>`, or [Module.Login].
var ErrNeedsLogin = errors.New("needs login")

// ErrTokenExpired: [CheckWithTokens] found the stored access token expired;
// it does not refresh it (the module does, on its next call).
var ErrTokenExpired = errors.New("the stored oauth access token has expired (the running daemon refreshes it; a check does not)")

// OAuthConfig is a server's `oauth:`: the MCP authorization spec's OAuth 2.1
// client, run by the go-sdk's handlers ([auth.AuthorizationCodeHandler],
// [extauth.ClientCredentialsHandler]): a 401 from the server leads to its
// protected resource metadata (RFC 9728), its authorization server's
// metadata (RFC 8414, OpenID discovery), then the grant, with PKCE S256,
// resource indicators (RFC 8707) and the iss check (RFC 9207).
type OAuthConfig struct {
	// Grant is authorization_code (a user logs in once, with
	// `axocoatl mcp login <server>`; the tokens are then refreshed) or
	// client_credentials (machine to machine: client_id and client_secret
	// required). Zero: authorization_code.
	Grant string `yaml:"grant"`
	// ClientID is a client pre-registered with the authorization server.
	// Zero: the Client ID Metadata Document (client_metadata_url), else
	// dynamic client registration, in the order the spec gives.
	ClientID string `yaml:"client_id"`
	// ClientSecret is the pre-registered client's secret. Zero: a public
	// client (or, with PrivateKey, one that signs).
	ClientSecret secret.Secret `yaml:"client_secret"`
	// PrivateKey is the PEM private key (PKCS#8, SEC 1 or PKCS#1; EC P-256
	// or P-384, or RSA of 2048 bits or more) with which a client_credentials
	// client authenticates by private_key_jwt (RFC 7523): each token
	// request carries a client assertion signed with it (ES256, ES384 or
	// RS256 by the key) instead of a client_secret. Zero: client_secret.
	PrivateKey secret.Secret `yaml:"private_key"`
	// AllowHosts are hosts the OAuth requests of a server at a public
	// address may reach although they are on this machine or a private
	// network (an authorization server inside the network). A server whose
	// URL is public has its OAuth requests held to public addresses
	// (beside its own host), so that its metadata cannot point this
	// process at 169.254.169.254 or localhost; a server on localhost or a
	// private address is not held. Zero: none.
	AllowHosts []string `yaml:"allow_hosts"`
	// KeyID is the kid of PrivateKey's client assertions, for an
	// authorization server that knows the client's keys by id. Zero: none.
	KeyID string `yaml:"key_id"`
	// Scopes, when set, are requested instead of the ones the server's
	// challenge or metadata name (authorization_code only). Zero: those.
	Scopes []string `yaml:"scopes"`
	// RedirectURL is where the authorization server sends the user back
	// with the code: the daemon's /oauth/callback. Zero: the host's (the
	// daemon sets its own listen address).
	RedirectURL string `yaml:"redirect_url"`
	// ClientMetadataURL is the https URL of this client's Client ID
	// Metadata Document, used as the client_id by authorization servers
	// that support them. Zero: none.
	ClientMetadataURL string `yaml:"client_metadata_url"`
}

func (o *OAuthConfig) grant() string {
	if o.Grant == "" {
		return GrantAuthorizationCode
	}
	return o.Grant
}

// validate checks the entry's oauth block; keys are relative to it.
func (o *OAuthConfig) validate() error {
	bad := cfgerr.Errorf
	switch o.grant() {
	case GrantAuthorizationCode:
	case GrantClientCredentials:
		if o.ClientID == "" {
			return bad("client_id", "is required for grant client_credentials")
		}
		switch hasSecret, hasKey := o.ClientSecret.Reveal() != "", o.PrivateKey.Reveal() != ""; {
		case hasSecret && hasKey:
			return bad("private_key", "and client_secret are two ways to authenticate the client: set one")
		case !hasSecret && !hasKey:
			return bad("client_secret", "(or private_key) is required for grant client_credentials")
		case hasKey:
			if _, err := parseAssertionKey(o.PrivateKey.Reveal()); err != nil {
				return bad("private_key", "%s", err.Error())
			}
		}
		if len(o.Scopes) > 0 {
			return bad("scopes", "apply to grant authorization_code only (client_credentials requests the scopes the server names)")
		}
		if o.ClientMetadataURL != "" {
			return bad("client_metadata_url", "applies to grant authorization_code only")
		}
	default:
		return bad("grant", "%q must be authorization_code or client_credentials", o.Grant)
	}
	if o.grant() != GrantClientCredentials && o.PrivateKey.Reveal() != "" {
		return bad("private_key", "applies to grant client_credentials only")
	}
	if len(o.AllowHosts) > MaxOAuthAllowHosts {
		return bad("allow_hosts", "has %d entries, more than %d", len(o.AllowHosts), MaxOAuthAllowHosts)
	}
	for _, h := range o.AllowHosts {
		if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
			continue
		}
		if h == "" || len(h) > 253 || strings.ContainsAny(h, "/:@?#[]% \t\r\n") {
			return bad("allow_hosts", "%q is not a host name or IP address (no scheme, port or path)", truncate(h, 64))
		}
	}
	if o.KeyID != "" && o.PrivateKey.Reveal() == "" {
		return bad("key_id", "needs private_key")
	}
	if len(o.KeyID) > 256 || strings.ContainsAny(o.KeyID, "\"\\\r\n") {
		return bad("key_id", "must be at most 256 characters, without quotes, backslashes or line breaks")
	}
	if o.ClientSecret.Reveal() != "" && o.ClientID == "" {
		return bad("client_secret", "needs client_id")
	}
	for _, s := range o.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
			return bad("scopes", "%q is not a scope token", s)
		}
	}
	if o.RedirectURL != "" {
		u, err := url.Parse(o.RedirectURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("redirect_url", "%q must be an absolute http or https URL", redactURL(o.RedirectURL))
		}
	}
	if o.ClientMetadataURL != "" {
		u, err := url.Parse(o.ClientMetadataURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" {
			return bad("client_metadata_url", "%q must be an https URL with a path (the spec's Client ID Metadata Document)", redactURL(o.ClientMetadataURL))
		}
	}
	return nil
}

// CodeFetcher gets an authorization code: it sends the user to authURL
// and returns the code, state and iss the authorization server redirected
// back with. See [Config].FetchCode and [Module.Login].
type CodeFetcher func(ctx context.Context, server, authURL string) (*auth.AuthorizationResult, error)

// oauthClient is one server's OAuth state, shared by its connection
// attempts: the go-sdk handler, which keeps the token source, behind a
// guard that persists tokens and says when a login is needed.
type oauthClient struct {
	server string
	cfg    *OAuthConfig
	store  TokenStore // nil: tokens in memory only
	// loadErr is why the stored token could not be read before the
	// module had a logger.
	loadErr error
	// probe: a one-shot Check, which must not refresh (the refresh token
	// may rotate, and the daemon's copy would then be refused) nor store.
	probe bool
	log   *slog.Logger
	early time.Duration
	http  *http.Client // for the authorization server; never sends the server's headers

	mu      sync.Mutex
	handler auth.OAuthHandler
	// unattend is the code fetcher of a session's handler: FetchCode, else
	// ErrNeedsLogin at once. A login's handler has its own (see login).
	unattend CodeFetcher
	needs    bool // the last authorization wanted a login it could not get
}

// newOAuthClient builds a server's handler; stored tokens, if any, are
// its initial token source.
// A stored token that cannot be read is logged and left alone: the server
// then needs a login, which replaces it.
func newOAuthClient(cfg ServerConfig, mcfg Config, log *slog.Logger) (*oauthClient, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := *cfg.OAuth
	if o.RedirectURL == "" {
		o.RedirectURL = mcfg.RedirectURL
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	var rt http.RoundTripper = base
	if g := newOAuthGuard(cfg.Name, cfg.URL, o.AllowHosts); g != nil {
		rt = g.transport(base)
	}
	c := &oauthClient{
		server: cfg.Name, cfg: &o, store: mcfg.Tokens, early: DefaultRefreshEarly, log: log,
		http:     &http.Client{Transport: rt, Timeout: cfg.timeout()},
		unattend: mcfg.FetchCode,
	}
	if c.unattend == nil {
		c.unattend = func(context.Context, string, string) (*auth.AuthorizationResult, error) {
			return nil, ErrNeedsLogin
		}
	}
	h, err := c.build(&handlerFetch{fetch: c.unattend})
	if err != nil {
		return nil, err
	}
	c.handler = h
	return c, nil
}

// handlerFetch is the code fetcher of one go-sdk handler: a login's
// until its login ends, then the unattended one.
type handlerFetch struct {
	mu    sync.Mutex
	fetch CodeFetcher
}

func (f *handlerFetch) set(fetch CodeFetcher) {
	f.mu.Lock()
	f.fetch = fetch
	f.mu.Unlock()
}

func (f *handlerFetch) get() CodeFetcher {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fetch
}

// build makes a fresh go-sdk handler, starting from the stored token,
// whose authorization codes come from hf.
func (c *oauthClient) build(hf *handlerFetch) (auth.OAuthHandler, error) {
	o := c.cfg
	var creds *oauthex.ClientCredentials
	if o.ClientID != "" {
		creds = &oauthex.ClientCredentials{ClientID: o.ClientID}
		if s := o.ClientSecret.Reveal(); s != "" {
			creds.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: s}
		}
	}
	if o.grant() == GrantClientCredentials && o.PrivateKey.Reveal() != "" {
		key, err := parseAssertionKey(o.PrivateKey.Reveal())
		if err != nil {
			return nil, fmt.Errorf("oauth: %w: private_key %s", ErrInvalidConfig, err)
		}
		return &jwtClientHandler{clientID: o.ClientID, kid: o.KeyID, key: key, http: c.http}, nil
	}
	if o.grant() == GrantClientCredentials {
		h, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{Credentials: creds, HTTPClient: c.http})
		if err != nil {
			return nil, fmt.Errorf("oauth: %w", err)
		}
		return &lockedHandler{h: h}, nil
	}
	redirect := o.RedirectURL
	hc := &auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient: creds,
		RedirectURL:         redirect,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			return c.fetchCode(ctx, hf.get(), args)
		},
		RequestRefreshToken: true,
		Client:              c.http,
		NewTokenSource: func(ctx context.Context, oc *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
			rec := StoredToken{Token: tok, TokenURL: oc.Endpoint.TokenURL, AuthURL: oc.Endpoint.AuthURL, AuthStyle: int(oc.Endpoint.AuthStyle),
				ClientID: oc.ClientID, ClientSecret: oc.ClientSecret, Scopes: oc.Scopes, RedirectURL: oc.RedirectURL}
			if err := c.save(rec); err != nil {
				return nil, err
			}
			return c.source(ctx, rec), nil
		},
	}
	if o.ClientMetadataURL != "" {
		hc.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: o.ClientMetadataURL}
	}
	if creds == nil {
		hc.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{redirect}, ClientName: "axocoatl",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
			TokenEndpointAuthMethod: "none",
		}}
	}
	if len(o.Scopes) > 0 {
		scopes := slices.Clone(o.Scopes)
		hc.ScopeFilter = func([]string) []string { return scopes }
	}
	if c.store != nil {
		rec, err := c.store.Load(c.server)
		if err != nil && !errors.Is(err, ErrNoToken) {
			c.mu.Lock()
			c.loadErr = err // logged once the module has a logger (setLogger)
			c.mu.Unlock()
			c.logger().Warn("mcp server oauth token not read: the server needs a login", "server", c.server, "error", err)
		}
		if err == nil {
			refreshCtx := context.WithValue(context.Background(), oauth2.HTTPClient, c.http)
			hc.InitialTokenSource = c.source(refreshCtx, rec)
		}
	}
	if redirect == "" {
		return nil, fmt.Errorf("oauth: %w: redirect_url is not set and the host gave none", ErrInvalidConfig)
	}
	h, err := auth.NewAuthorizationCodeHandler(hc)
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	return h, nil
}

// lockedHandler serializes the client credentials handler, whose token
// source field is not guarded.
type lockedHandler struct {
	mu sync.Mutex
	h  auth.OAuthHandler
}

func (l *lockedHandler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.TokenSource(ctx)
}

func (l *lockedHandler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.Authorize(ctx, req, resp)
}

func (c *oauthClient) fetchCode(ctx context.Context, fetch CodeFetcher, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	res, err := fetch(ctx, c.server, args.URL)
	if errors.Is(err, ErrNeedsLogin) {
		c.mu.Lock()
		c.needs = true
		c.mu.Unlock()
	}
	return res, err
}

func (c *oauthClient) save(rec StoredToken) error {
	c.mu.Lock()
	c.needs = false
	c.mu.Unlock()
	if c.store == nil || c.probe {
		return nil
	}
	if err := c.store.Save(c.server, rec); err != nil {
		return fmt.Errorf("oauth: storing the token: %w", err)
	}
	return nil
}

// source is the token source of a stored record: the access token until
// c.early before it expires, then a refresh (stored again). A record
// without a refresh token, once expired, gives invalid_grant, on which the
// go-sdk's transport sends no token: the 401 then leads to Authorize.
func (c *oauthClient) source(ctx context.Context, rec StoredToken) oauth2.TokenSource {
	r := &refresher{c: c, ctx: ctx, rec: rec}
	return oauth2.ReuseTokenSourceWithExpiry(rec.Token, r, c.early)
}

type refresher struct {
	c   *oauthClient
	ctx context.Context
	mu  sync.Mutex
	rec StoredToken
}

func (r *refresher) Token() (*oauth2.Token, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rec.Token == nil || r.rec.Token.RefreshToken == "" {
		return nil, &oauth2.RetrieveError{ErrorCode: "invalid_grant", ErrorDescription: "no refresh token"}
	}
	if r.c.probe {
		return nil, ErrTokenExpired
	}
	oc := r.rec.oauth2Config()
	// An expired access token makes the source refresh at once.
	tok, err := oc.TokenSource(r.ctx, &oauth2.Token{RefreshToken: r.rec.Token.RefreshToken}).Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode == "invalid_grant" {
			r.c.mu.Lock()
			r.c.needs = true
			r.c.mu.Unlock()
		}
		return nil, err
	}
	r.rec.Token = tok
	if err := r.c.save(r.rec); err != nil {
		// The call goes on with the new token; a restart will need the
		// refresh token that is now only in memory.
		r.c.logger().Warn("mcp server oauth token refreshed but not stored", "server", r.c.server, "error", err)
	}
	return tok, nil
}

// TokenSource and Authorize make oauthClient the transport's
// [auth.OAuthHandler].
func (c *oauthClient) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	c.mu.Lock()
	h := c.handler
	c.mu.Unlock()
	return h.TokenSource(ctx)
}

func (c *oauthClient) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	c.mu.Lock()
	h := c.handler
	c.mu.Unlock()
	err := h.Authorize(ctx, req, resp)
	if err != nil && errors.Is(err, ErrNeedsLogin) {
		return fmt.Errorf("mcp server %s: %w (run: axocoatl mcp login %s)", c.server, ErrNeedsLogin, c.server)
	}
	return err
}

func (c *oauthClient) logger() *slog.Logger {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log
}

func (c *oauthClient) setLogger(log *slog.Logger) {
	c.mu.Lock()
	c.log = log
	err := c.loadErr
	c.loadErr = nil
	c.mu.Unlock()
	if err != nil {
		log.Warn("mcp server oauth token not read: the server needs a login", "server", c.server, "error", err)
	}
}

// needsLogin reports whether the last authorization wanted a login.
func (c *oauthClient) needsLogin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.needs
}

// login runs the authorization code flow once with fetch, outside any
// session: it asks the server (an unauthenticated POST) for its 401 and
// hands it to the go-sdk handler, as a session's first request would.
func (c *oauthClient) login(ctx context.Context, endpoint string, fetch CodeFetcher) error {
	if c.cfg.grant() != GrantAuthorizationCode {
		return fmt.Errorf("mcp server %s: oauth grant %s needs no login", c.server, c.cfg.grant())
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("mcp server %s: %w", c.server, err)
	}
	if resp.StatusCode != http.StatusUnauthorized {
		// No challenge to follow: discovery starts from the well-known
		// URLs, as for a 401 without WWW-Authenticate.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		resp = &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(nil))}
	}
	req.Body = http.NoBody
	// A handler of its own: the login starts over from discovery, and the
	// sessions keep the current one until it succeeds. Once it has, its
	// later codes (a refused refresh) are the unattended fetcher's.
	hf := &handlerFetch{fetch: fetch}
	h, err := c.build(hf)
	if err != nil {
		resp.Body.Close()
		return err
	}
	err = h.Authorize(ctx, req, resp)
	hf.set(c.unattend)
	if err != nil {
		return fmt.Errorf("mcp server %s: login: %w", c.server, err)
	}
	c.mu.Lock()
	c.handler = h
	c.needs = false
	c.mu.Unlock()
	return nil
}
