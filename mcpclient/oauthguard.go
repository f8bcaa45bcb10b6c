package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/netguard"
)

// The OAuth requests of a server (protected resource and authorization
// server metadata, registration, token and refresh requests) go where the
// server's answers point. For a server at a public address those answers
// could point at this machine or its network (a cloud metadata service at
// 169.254.169.254, an admin port on localhost): so they are held to the
// server's class. A server whose URL host is public (a name, or a public
// IP address) gets an OAuth client that reaches public addresses only
// (checked on the URL and again on the address dialed, see
// [netguard.Control]), except the server's own host and the hosts in
// [OAuthConfig].AllowHosts. A server on this machine or a private network
// (localhost, a loopback or private IP address in its URL) is trusted with
// its own network: its OAuth client is not guarded, so a local MCP server
// with a local authorization server keeps working.

// ErrOAuthHostRefused: an OAuth request of a server at a public address
// was to go to a loopback, private or link-local address (see
// [OAuthConfig].AllowHosts). It wraps [netguard.ErrRefused].
var ErrOAuthHostRefused = fmt.Errorf("oauth request refused: %w", netguard.ErrRefused)

// oauthGuard decides which hosts a server's OAuth client may reach.
type oauthGuard struct {
	server  string   // the server's name, for errors
	allowed []string // the server's own host and AllowHosts
}

// newOAuthGuard is the guard for a server at serverURL: nil (no guard) when
// its host is not public.
func newOAuthGuard(name, serverURL string, allow []string) *oauthGuard {
	u, err := url.Parse(serverURL)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	if netguard.CheckHost(u.Hostname()) != nil {
		return nil // a server on this machine or a private network
	}
	return &oauthGuard{server: name, allowed: append([]string{u.Hostname()}, allow...)}
}

// refused says why an OAuth request may not go to host (before any dial).
func (g *oauthGuard) refused(host string) error {
	if netguard.Allowed(host, g.allowed) {
		return nil
	}
	if err := netguard.CheckHost(host); err != nil {
		return g.explain(host, err)
	}
	return nil
}

func (g *oauthGuard) explain(host string, err error) error {
	return fmt.Errorf("%w: mcp server %s is at a public address and its OAuth requests go to public addresses only, unless the host is in oauth.allow_hosts: %s: %w",
		ErrOAuthHostRefused, g.server, truncate(host, 255), err)
}

// transport is the OAuth client's round tripper under g: requests to an
// allowed host go through open; others are checked by name, then sent
// through a transport whose every dial is checked ([netguard.Control])
// and which uses no proxy (the check must see the address dialed).
func (g *oauthGuard) transport(open *http.Transport) http.RoundTripper {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: netguard.Control}
	// A fresh transport, not a clone: a cloned DialTLSContext or proxy
	// would bypass the guard.
	guarded := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil && errors.Is(err, netguard.ErrRefused) {
				host, _, _ := net.SplitHostPort(addr)
				return nil, g.explain(host, err)
			}
			return c, err
		},
		ForceAttemptHTTP2: true, MaxIdleConns: 10, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, ExpectContinueTimeout: time.Second,
	}
	return guardedRoundTripper{g: g, open: open, guarded: guarded}
}

type guardedRoundTripper struct {
	g             *oauthGuard
	open, guarded *http.Transport
}

func (rt guardedRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Hostname()
	if netguard.Allowed(host, rt.g.allowed) {
		return rt.open.RoundTrip(req)
	}
	if err := rt.g.refused(host); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	if !strings.EqualFold(req.URL.Scheme, "http") && !strings.EqualFold(req.URL.Scheme, "https") {
		return nil, fmt.Errorf("%w: scheme %q", ErrOAuthHostRefused, truncate(req.URL.Scheme, 20))
	}
	return rt.guarded.RoundTrip(req)
}

// CloseIdleConnections closes both transports' idle connections.
func (rt guardedRoundTripper) CloseIdleConnections() {
	rt.open.CloseIdleConnections()
	rt.guarded.CloseIdleConnections()
}
