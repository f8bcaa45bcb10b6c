package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// CallbackPath is the route the authorization servers of the servers with
// `oauth:` send the user back to (the redirect_url's path by default).
const CallbackPath = "/oauth/callback"

// DefaultLoginTimeout bounds one login started over HTTP: the time a user
// has to approve in the browser.
const DefaultLoginTimeout = 10 * time.Minute

// Login states of GET /api/mcp/servers/{name}/login.
const (
	LoginNone    = "none"
	LoginPending = "pending"
	LoginDone    = "done"
	LoginFailed  = "failed"
)

// logins are the logins started over HTTP: at most one per server (a new
// one ends the one before), each waiting for its callback by state.
type logins struct {
	mu      sync.Mutex
	byState map[string]*login // the authorization URL's state -> its login
	last    map[string]*login // server -> its latest login
}

type login struct {
	server string
	cancel context.CancelFunc
	urlc   chan string // the authorization URL, once the discovery is done
	code   chan *auth.AuthorizationResult
	state  string // guarded by logins.mu
	status string // guarded by logins.mu
	err    string // guarded by logins.mu
}

// loginStatus is the body of the login routes.
type loginStatus struct {
	Server string `json:"server"`
	State  string `json:"state"`
	URL    string `json:"url,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Routes are the module's doors, for its servers with `oauth:`:
//
//	POST /api/mcp/servers/{name}/login  admin: start a login; answers {"url"} to send the user to
//	GET  /api/mcp/servers/{name}/login  admin: {"state": none|pending|done|failed, "error"?}
//	GET  /oauth/callback                public: the authorization server's redirect (the state is the key)
//
// A module without OAuth servers has none.
func (m *Module) Routes() []axocoatl.Route {
	if len(m.oauth) == 0 {
		return nil
	}
	return []axocoatl.Route{
		{Method: http.MethodPost, Pattern: "/api/mcp/servers/{name}/login", Scope: axocoatl.ScopeAdmin},
		{Method: http.MethodGet, Pattern: "/api/mcp/servers/{name}/login", Scope: axocoatl.ScopeAdmin},
		{Method: http.MethodGet, Pattern: CallbackPath, Scope: axocoatl.ScopePublic},
	}
}

// ServeHTTP serves [Module.Routes] once the module is started.
func (m *Module) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	h := m.http
	m.mu.Unlock()
	if h == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]string{"code": "not_started", "message": "mcpclient: module not started"}})
		return
	}
	h.ServeHTTP(w, r)
}

func (m *Module) routes(e *axocoatl.Engine) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range m.Routes() {
		var h http.HandlerFunc
		switch {
		case rt.Pattern == CallbackPath:
			h = m.serveCallback
		case rt.Method == http.MethodPost:
			h = m.serveLoginStart
		default:
			h = m.serveLoginStatus
		}
		mux.Handle(rt.Method+" "+rt.Pattern, e.GuardHTTP(axocoatl.HTTPRoute{Scope: rt.Scope}, h))
	}
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, code int, kind, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]string{"code": kind, "message": msg}})
}

// serveLoginStart starts a login and answers with the URL to send the user
// to, once the discovery (protected resource and authorization server
// metadata, registration) is done.
func (m *Module) serveLoginStart(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	oc := m.oauth[name]
	if oc == nil {
		apiError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no mcp server %q with oauth", name))
		return
	}
	if oc.cfg.grant() != GrantAuthorizationCode {
		apiError(w, http.StatusConflict, "no_login", fmt.Sprintf("mcp server %s uses grant %s: it needs no login", name, oc.cfg.grant()))
		return
	}
	m.mu.Lock()
	stopped := m.stopped
	m.mu.Unlock()
	if stopped == nil || stopped.Err() != nil {
		apiError(w, http.StatusServiceUnavailable, "stopped", "mcpclient is not running")
		return
	}
	ctx, cancel := context.WithTimeout(stopped, DefaultLoginTimeout)
	l := &login{server: name, cancel: cancel, urlc: make(chan string, 1), code: make(chan *auth.AuthorizationResult, 1), status: LoginPending}
	m.logins.mu.Lock()
	if prev := m.logins.last[name]; prev != nil {
		prev.cancel()
		delete(m.logins.byState, prev.state)
	}
	m.logins.last[name] = l
	m.logins.mu.Unlock()
	done := make(chan struct{})
	m.wg.Go(func() {
		defer close(done)
		defer cancel()
		err := m.Login(ctx, name, func(ctx context.Context, _ string, authURL string) (*auth.AuthorizationResult, error) {
			u, err := url.Parse(authURL)
			if err != nil {
				return nil, err
			}
			m.logins.mu.Lock()
			l.state = u.Query().Get("state")
			m.logins.byState[l.state] = l
			m.logins.mu.Unlock()
			l.urlc <- authURL
			select {
			case res := <-l.code:
				return res, nil
			case <-ctx.Done():
				return nil, fmt.Errorf("no login within %s: %w", DefaultLoginTimeout, ctx.Err())
			}
		})
		m.logins.mu.Lock()
		delete(m.logins.byState, l.state)
		l.status = LoginDone
		if err != nil {
			l.status, l.err = LoginFailed, m.redactErr(name, err)
		}
		m.logins.mu.Unlock()
	})
	t := time.NewTimer(oc.http.Timeout)
	defer t.Stop()
	select {
	case u := <-l.urlc:
		writeJSON(w, http.StatusOK, loginStatus{Server: name, State: LoginPending, URL: u})
	case <-done:
		st := m.loginStatus(name)
		apiError(w, http.StatusBadGateway, "login_failed", st.Error)
	case <-t.C:
		cancel()
		apiError(w, http.StatusGatewayTimeout, "login_timeout", fmt.Sprintf("mcp server %s: no authorization URL within %s", name, oc.http.Timeout))
	case <-r.Context().Done():
		cancel()
	}
}

func (m *Module) loginStatus(name string) loginStatus {
	m.logins.mu.Lock()
	defer m.logins.mu.Unlock()
	l := m.logins.last[name]
	if l == nil {
		return loginStatus{Server: name, State: LoginNone}
	}
	return loginStatus{Server: name, State: l.status, Error: l.err}
}

func (m *Module) serveLoginStatus(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if m.oauth[name] == nil {
		apiError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no mcp server %q with oauth", name))
		return
	}
	writeJSON(w, http.StatusOK, m.loginStatus(name))
}

// serveCallback takes the authorization server's redirect: the state names
// the login (unguessable, used once), the code and iss go to it. The page
// says what happened; the login itself checks state and iss again (the
// go-sdk's handler) and exchanges the code.
func (m *Module) serveCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	m.logins.mu.Lock()
	l := m.logins.byState[state]
	if l != nil {
		delete(m.logins.byState, state)
	}
	m.logins.mu.Unlock()
	page := func(code int, msg string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.WriteHeader(code)
		fmt.Fprintf(w, "<!doctype html><title>axocoatl</title><p>%s</p>\n", html.EscapeString(msg))
	}
	if state == "" || l == nil {
		page(http.StatusBadRequest, "No login is waiting for this answer (it ended, or was answered already). Start it again: the Connect button of the dashboard's MCP servers panel, or axocoatl mcp login <server>.")
		return
	}
	if e := q.Get("error"); e != "" {
		l.cancel()
		page(http.StatusBadRequest, fmt.Sprintf("The authorization server refused the login to %s: %s.", l.server, truncate(e, 100)))
		return
	}
	l.code <- &auth.AuthorizationResult{Code: q.Get("code"), State: state, Iss: q.Get("iss")}
	page(http.StatusOK, fmt.Sprintf("Logging in to %s: you can close this window.", l.server))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// redactErr is err's text with the server's secrets (and the host's)
// removed.
func (m *Module) redactErr(name string, err error) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.servers {
		if s.cfg.Name == name {
			return s.redact.Error(err).Error()
		}
	}
	return "login failed"
}

// loginPoll is how often [LoginVia] asks the daemon whether the user has
// come back from the authorization server.
const loginPoll = 500 * time.Millisecond

// LoginVia runs a login through a running host's routes (what
// `axocoatl mcp login` does): it starts the login of server at base (with
// token, if any), calls show with the authorization URL to send the user
// to, then waits until the login is done or failed, [DefaultLoginTimeout]
// passes, or ctx ends.
func LoginVia(ctx context.Context, base, token, server string, show func(authURL string)) error {
	api := strings.TrimRight(base, "/") + "/api/mcp/servers/" + url.PathEscape(server) + "/login"
	call := func(method string) (loginStatus, error) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		var st loginStatus
		req, err := http.NewRequestWithContext(rctx, method, api, nil)
		if err != nil {
			return st, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return st, fmt.Errorf("is the daemon running at %s? %w", base, err)
		}
		defer resp.Body.Close()
		var body struct {
			loginStatus
			Err *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
			return st, fmt.Errorf("%s %s: %d, not JSON", method, api, resp.StatusCode)
		}
		if resp.StatusCode != http.StatusOK {
			msg := resp.Status
			if body.Err != nil {
				msg = body.Err.Message
			}
			return st, fmt.Errorf("%s %s: %d: %s", method, api, resp.StatusCode, msg)
		}
		return body.loginStatus, nil
	}
	st, err := call(http.MethodPost)
	if err != nil {
		return err
	}
	show(st.URL)
	deadline := time.NewTimer(DefaultLoginTimeout + time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(loginPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("mcp server %s: no login within %s", server, DefaultLoginTimeout)
		case <-tick.C:
		}
		st, err := call(http.MethodGet)
		switch {
		case err != nil:
			return err
		case st.State == LoginDone:
			return nil
		case st.State == LoginFailed:
			return fmt.Errorf("mcp server %s: %s", server, st.Error)
		case st.State != LoginPending:
			return fmt.Errorf("mcp server %s: the login ended (%s)", server, st.State)
		}
	}
}
