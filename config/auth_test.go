package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/internal/httpguard/jwttest"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/lattice"
)

const (
	adminToken    = "admin-token-0123456789abcdef"
	readerToken   = "reader-token-0123456789abc"
	runnerToken   = "runner-token-0123456789abc"
	approverToken = "approver-token-0123456789a"
)

// scopedYAML: two agents; a reader and a runner that see support-* only,
// an approver that sees every agent, and the api_token (every scope).
const scopedYAML = `
server:
  api_token: ` + adminToken + `
  max_auth_failures: -1
  tokens:
    - {name: reader, token: ` + readerToken + `, scopes: [read], agents: ["support-*"]}
    - {name: runner, token: ` + runnerToken + `, scopes: [read, execute], agents: ["support-*"]}
    - {name: approver, token: ` + approverToken + `, scopes: [read, approve]}
agents:
  - id: support-a
  - id: billing
`

// buildScoped builds the runtime of yaml behind a real server whose URL is
// the public URL (the cards' and metadata's URLs are the server's).
func buildScoped(t *testing.T, yaml string) (*config.Runtime, *httptest.Server) {
	t.Helper()
	ctx := context.Background()
	cfg, err := config.ParseWith(ctx, "auth.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.DataDir = t.TempDir()
	srv := httptest.NewUnstartedServer(nil)
	cfg.Server.PublicURL = "http://" + srv.Listener.Addr().String()
	rt, err := cfg.Build(ctx, config.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := rt.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		_ = rt.Close(context.Background())
	})
	return rt, srv
}

// Every route × every scope, over the one route list (Runtime.Routes):
// without credentials a route that is not public answers 401; with a token
// that lacks the route's declared scope the guard answers 403 naming it;
// with one that has it the guard lets the request through. The sensitive
// routes declare the scope the issue names (a read token cannot execute or
// approve), and none is left at the zero scope by mistake.
func TestEveryRouteEveryScope(t *testing.T) {
	rt, _ := buildScoped(t, scopedYAML)
	h, err := rt.Handler()
	if err != nil {
		t.Fatal(err)
	}
	tokens := []struct {
		name, token string
		scopes      []axocoatl.Scope
	}{
		{"none", "", nil},
		{"reader", readerToken, []axocoatl.Scope{axocoatl.ScopeRead}},
		{"runner", runnerToken, []axocoatl.Scope{axocoatl.ScopeRead, axocoatl.ScopeExecute}},
		{"approver", approverToken, []axocoatl.Scope{axocoatl.ScopeRead, axocoatl.ScopeApprove}},
		{"admin", adminToken, []axocoatl.Scope{axocoatl.ScopeAdmin}},
	}
	want := map[string]axocoatl.Scope{
		"POST /api/agents/{id}/execute":      axocoatl.ScopeExecute,
		"DELETE /api/conversations/{id}":     axocoatl.ScopeExecute,
		"POST /api/approvals/{id}":           axocoatl.ScopeApprove,
		"DELETE /api/approvals/decisions":    axocoatl.ScopeApprove,
		"GET /api/agents":                    axocoatl.ScopeRead,
		"GET /api/events":                    axocoatl.ScopeRead,
		"POST /a2a/tasks":                    axocoatl.ScopeExecute,
		"POST /a2a/message:send":             axocoatl.ScopeExecute,
		"POST /a2a/agents/{id}/message:send": axocoatl.ScopeExecute,
		"POST /mcp":                          axocoatl.ScopeRead,
		"POST /api/events":                   axocoatl.ScopeAdmin,
	}
	n := 0
	for _, r := range rt.Routes() {
		key := r.Method + " " + r.Pattern
		if s, ok := want[key]; ok && r.Scope != s {
			t.Errorf("%s declares scope %q, want %q", key, r.Scope, s)
		}
		delete(want, key)
		if r.Scope == axocoatl.ScopeToken && !strings.HasPrefix(r.Pattern, "/api/webhooks") {
			t.Errorf("%s declares no scope (admin by default): declare the one it needs", key)
		}
		path := strings.NewReplacer("{$}", "", "{id}", "support-a", "{task}", "t1", "{config}", "c1", "{name}", "w1", "{path...}", "mcp").Replace(r.Pattern)
		for _, tok := range tokens {
			n++
			req := httptest.NewRequest(r.Method, path, strings.NewReader("{}"))
			req.Host = "127.0.0.1:8080"
			if tok.token != "" {
				req.Header.Set("Authorization", "Bearer "+tok.token)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			refused := w.Code == http.StatusForbidden && strings.Contains(w.Body.String(), "needs scope")
			switch {
			case r.Scope == axocoatl.ScopePublic:
				if w.Code == http.StatusUnauthorized || refused {
					t.Errorf("%s (public) as %s: %d %s", key, tok.name, w.Code, w.Body)
				}
			case tok.token == "":
				if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
					t.Errorf("%s without a token: %d, want 401 with WWW-Authenticate", key, w.Code)
				}
			case (&axocoatl.Identity{Scopes: tok.scopes}).Can(r.Scope):
				if w.Code == http.StatusUnauthorized || refused {
					t.Errorf("%s as %s (%v): %d %s, want it let through", key, tok.name, tok.scopes, w.Code, w.Body)
				}
			default:
				if !refused {
					t.Errorf("%s as %s (%v): %d %s, want 403 naming scope %s", key, tok.name, tok.scopes, w.Code, w.Body, r.Scope)
				}
			}
		}
	}
	for key := range want {
		t.Errorf("route %s is not in Runtime.Routes", key)
	}
	if n < 200 {
		t.Fatalf("only %d route × token checks", n)
	}
}

type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func clientWith(token string) *http.Client {
	return &http.Client{Transport: bearerTransport{token, http.DefaultTransport}, Timeout: 60 * time.Second}
}

func call(t *testing.T, c *http.Client, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A token's agent globs hold on every door: the HTTP API (agents, runs,
// conversations), MCP (tools/list, tools/call), A2A (the card, sends) and
// the WebSocket's events; a read token runs nothing anywhere.
func TestScopedTokensSeeOnlyTheirAgents(t *testing.T) {
	_, srv := buildScoped(t, scopedYAML)
	ctx := context.Background()
	reader, runner, admin := clientWith(readerToken), clientWith(runnerToken), clientWith(adminToken)

	// HTTP API.
	if code, body := call(t, reader, "GET", srv.URL+"/api/agents", ""); code != 200 || !strings.Contains(body, `"support-a"`) || strings.Contains(body, "billing") {
		t.Errorf("reader GET /api/agents: %d %s", code, body)
	}
	if code, _ := call(t, reader, "GET", srv.URL+"/api/agents/billing", ""); code != 404 {
		t.Errorf("reader GET /api/agents/billing: %d, want 404", code)
	}
	if code, body := call(t, reader, "POST", srv.URL+"/api/agents/support-a/execute", `{"input":"hi"}`); code != 403 {
		t.Errorf("reader execute: %d %s, want 403", code, body)
	}
	if code, body := call(t, runner, "POST", srv.URL+"/api/agents/billing/execute", `{"input":"hi"}`); code != 404 {
		t.Errorf("runner execute billing: %d %s, want 404", code, body)
	}
	code, body := call(t, runner, "POST", srv.URL+"/api/agents/support-a/execute", `{"input":"hi","conversation_id":"new"}`)
	if code != 200 {
		t.Fatalf("runner execute support-a: %d %s", code, body)
	}
	code, body = call(t, admin, "POST", srv.URL+"/api/agents/billing/execute", `{"input":"secret billing","conversation_id":"new"}`)
	if code != 200 {
		t.Fatalf("admin execute billing: %d %s", code, body)
	}
	var billing struct {
		ConversationID string `json:"conversation_id"`
	}
	_ = json.Unmarshal([]byte(body), &billing)
	if code, body := call(t, runner, "GET", srv.URL+"/api/conversations", ""); code != 200 || !strings.Contains(body, "support-a") || strings.Contains(body, "billing") {
		t.Errorf("runner conversations: %d %s", code, body)
	}
	if code, _ := call(t, runner, "GET", srv.URL+"/api/conversations/"+billing.ConversationID, ""); code != 404 {
		t.Errorf("runner reads billing's conversation: %d, want 404", code)
	}
	if code, _ := call(t, runner, "DELETE", srv.URL+"/api/conversations/"+billing.ConversationID, ""); code != 404 {
		t.Errorf("runner deletes billing's conversation: %d, want 404", code)
	}
	if code, body := call(t, admin, "GET", srv.URL+"/api/conversations", ""); !strings.Contains(body, "billing") {
		t.Errorf("admin conversations: %d %s", code, body)
	}
	if code, body := call(t, runner, "GET", srv.URL+"/api/whoami", ""); code != 200 || !strings.Contains(body, `"name":"runner"`) || !strings.Contains(body, `"support-*"`) {
		t.Errorf("runner whoami: %d %s", code, body)
	}

	// MCP over the go-sdk client.
	mcpTools := func(c *http.Client) (*mcp.ClientSession, []string) {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "auth-test", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: c}, nil)
		if err != nil {
			t.Fatalf("MCP connect: %v", err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		return cs, names
	}
	cs, names := mcpTools(runner)
	if fmt.Sprint(names) != "[agent_support-a]" {
		t.Errorf("runner tools/list: %v, want [agent_support-a]", names)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_billing", Arguments: map[string]any{"input": "hi"}}); err == nil && !res.IsError {
		t.Errorf("runner called agent_billing: %+v", res)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_support-a", Arguments: map[string]any{"input": "hi"}}); err != nil || res.IsError {
		t.Errorf("runner calls agent_support-a: %v %+v", err, res)
	}
	rcs, names := mcpTools(reader)
	if fmt.Sprint(names) != "[agent_support-a]" {
		t.Errorf("reader tools/list: %v", names)
	}
	if res, err := rcs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_support-a", Arguments: map[string]any{"input": "hi"}}); err == nil && !res.IsError {
		t.Errorf("reader ran agent_support-a over MCP: %+v", res)
	}
	if _, names := mcpTools(admin); fmt.Sprint(names) != "[agent_billing agent_support-a]" {
		t.Errorf("admin tools/list: %v", names)
	}

	// A2A with a2a-go: the card lists the runner's agents only, and a send
	// to another agent is refused.
	card, err := agentcard.NewResolver(runner).Resolve(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var skills []string
	for _, s := range card.Skills {
		skills = append(skills, s.ID)
	}
	if fmt.Sprint(skills) != "[support-a]" {
		t.Errorf("runner's card skills: %v", skills)
	}
	a2c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(runner))
	if err != nil {
		t.Fatal(err)
	}
	defer a2c.Destroy()
	send := func(c *a2aclient.Client, receiver string) (a2a03.SendMessageResult, error) {
		m := a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "hi"})
		m.Metadata = map[string]any{"receiver_id": receiver}
		return c.SendMessage(ctx, &a2a03.MessageSendParams{Message: m})
	}
	if _, err := send(a2c, "billing"); err == nil {
		t.Error("runner sent to billing over A2A")
	}
	if res, err := send(a2c, "support-a"); err != nil {
		t.Errorf("runner sends to support-a over A2A: %v", err)
	} else if task, ok := res.(*a2a03.Task); !ok || task.Status.State != a2a03.TaskStateCompleted {
		t.Errorf("runner's A2A task: %+v", res)
	}
	ra2c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(reader))
	if err != nil {
		t.Fatal(err)
	}
	defer ra2c.Destroy()
	if _, err := send(ra2c, "support-a"); err == nil {
		t.Errorf("reader sent over A2A: %v", err)
	}
	if code, body := call(t, runner, "GET", srv.URL+"/a2a/agents/billing/.well-known/agent-card.json", ""); code != 404 {
		t.Errorf("runner reads billing's card: %d %s", code, body)
	}

	// The WebSocket: the runner sees events of support-a, none of billing.
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(wctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/api/events",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + runnerToken}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(8 << 20)
	if _, ready, err := conn.Read(wctx); err != nil || bytes.Contains(ready, []byte("secret billing")) {
		t.Fatalf("ready frame: %v, or it shows billing's history", err)
	}
	// billing runs to its end before support-a starts: a billing event that
	// got through would arrive before support-a's.
	if code, body := call(t, admin, "POST", srv.URL+"/api/agents/billing/execute", `{"input":"secret billing"}`); code != 200 {
		t.Fatalf("admin execute billing: %d %s", code, body)
	}
	if code, body := call(t, admin, "POST", srv.URL+"/api/agents/support-a/execute", `{"input":"for support"}`); code != 200 {
		t.Fatalf("admin execute support-a: %d %s", code, body)
	}
	for {
		_, frame, err := conn.Read(wctx)
		if err != nil {
			t.Fatalf("waiting for support-a's events: %v", err)
		}
		if bytes.Contains(frame, []byte("billing")) {
			t.Fatalf("the runner's stream shows billing: %s", frame)
		}
		if bytes.Contains(frame, []byte(`"TaskCompleted"`)) && bytes.Contains(frame, []byte("for support")) {
			break
		}
	}
}

// The doors behind JWT access tokens of an authorization server (an
// httptest one issuing RS256 tokens): /mcp and A2A answer a valid token
// 200, and an expired one, a wrong aud or iss, a bad signature, alg none
// or an unknown kid 401 with a Bearer challenge naming the resource
// metadata; a rotated key set is picked up. The metadata and the A2A card
// say how to get a token.
func TestDoorsBehindJWT(t *testing.T) {
	k1, k2 := jwttest.NewRSA(t, "k1"), jwttest.NewRSA(t, "k2")
	as := jwttest.New(t, k1)
	const aud = "https://axocoatl.test/mcp"
	_, srv := buildScoped(t, `
server:
  max_auth_failures: -1
  auth:
    oauth:
      issuer: `+as.URL+`
      audience: `+aud+`
      jwks_min_refresh: 1ms
agents:
  - id: support-a
`)
	ctx := context.Background()
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"iss": as.URL, "aud": aud, "sub": "alice", "scope": "read execute",
			"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	valid := jwttest.Sign(t, k1, claims(nil), "")

	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	tasksGet := `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"nope"}}`
	post := func(path, tok, body string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	refused := map[string]string{
		"no token":      "",
		"expired":       jwttest.Sign(t, k1, claims(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), ""),
		"wrong aud":     jwttest.Sign(t, k1, claims(func(c map[string]any) { c["aud"] = "https://other.test" }), ""),
		"wrong iss":     jwttest.Sign(t, k1, claims(func(c map[string]any) { c["iss"] = "https://evil.test" }), ""),
		"bad signature": jwttest.Sign(t, jwttest.NewRSA(t, "k1"), claims(nil), ""),
		"alg none":      jwttest.Sign(t, k1, claims(nil), "none"),
		"unknown kid":   jwttest.Sign(t, jwttest.NewRSA(t, "k9"), claims(nil), ""),
	}
	for name, tok := range refused {
		for _, door := range []struct{ path, body string }{{"/mcp", initialize}, {"/a2a", tasksGet}} {
			resp := post(door.path, tok, door.body)
			challenge := resp.Header.Get("WWW-Authenticate")
			if resp.StatusCode != 401 || !strings.HasPrefix(challenge, "Bearer ") || !strings.Contains(challenge, "resource_metadata=") {
				t.Errorf("%s on %s: %d %q, want 401 with a Bearer challenge", name, door.path, resp.StatusCode, challenge)
			}
			if name != "no token" && !strings.Contains(challenge, `error="invalid_token"`) {
				t.Errorf("%s on %s: challenge %q lacks invalid_token", name, door.path, challenge)
			}
		}
	}
	if resp := post("/mcp", valid, initialize); resp.StatusCode != 200 {
		t.Errorf("valid JWT on /mcp: %d", resp.StatusCode)
	}
	if resp := post("/a2a", valid, tasksGet); resp.StatusCode != 200 {
		t.Errorf("valid JWT on /a2a: %d", resp.StatusCode)
	}
	// Real clients with the valid token.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "jwt-test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: clientWith(valid)}, nil)
	if err != nil {
		t.Fatalf("MCP with a JWT: %v", err)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_support-a", Arguments: map[string]any{"input": "hi"}}); err != nil || res.IsError {
		t.Errorf("MCP call with a JWT: %v %+v", err, res)
	}
	_ = cs.Close()

	// Rotation: the issuer now signs with k2 only.
	as.SetKeys(k2)
	rotated := jwttest.Sign(t, k2, claims(func(c map[string]any) { c["sub"] = "bob" }), "")
	if resp := post("/mcp", rotated, initialize); resp.StatusCode != 200 {
		t.Errorf("a token of the rotated key: %d, want 200", resp.StatusCode)
	}
	if resp := post("/a2a", jwttest.Sign(t, k1, claims(func(c map[string]any) { c["sub"] = "carol" }), ""), tasksGet); resp.StatusCode != 401 {
		t.Errorf("a token of the withdrawn key: %d, want 401", resp.StatusCode)
	}

	// Protected resource metadata (RFC 9728), for the root and for /mcp.
	for path, resource := range map[string]string{
		"/.well-known/oauth-protected-resource":     srv.URL,
		"/.well-known/oauth-protected-resource/mcp": srv.URL + "/mcp",
	} {
		code, body := call(t, http.DefaultClient, "GET", srv.URL+path, "")
		var meta struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
		}
		_ = json.Unmarshal([]byte(body), &meta)
		if code != 200 || meta.Resource != resource || fmt.Sprint(meta.AuthorizationServers) != "["+as.URL+"]" {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}

	// The A2A card declares the OAuth scheme, and both a2a-go generations
	// read it.
	code, body := call(t, http.DefaultClient, "GET", srv.URL+"/.well-known/agent-card.json", "")
	var c03 a2a03.AgentCard
	var c1 a2a1.AgentCard
	if err := json.Unmarshal([]byte(body), &c03); code != 200 || err != nil {
		t.Fatalf("card (0.3): %d %v %s", code, err, body)
	}
	if err := json.Unmarshal([]byte(body), &c1); err != nil {
		t.Fatalf("card (1.0): %v", err)
	}
	if _, ok := c03.SecuritySchemes["oauth2"].(a2a03.OAuth2SecurityScheme); !ok {
		t.Errorf("0.3 card schemes: %+v", c03.SecuritySchemes)
	}
	if _, ok := c1.SecuritySchemes["oauth2"]; !ok {
		t.Errorf("1.0 card schemes: %+v", c1.SecuritySchemes)
	}
}

// Guards: store pages one conversation listing reads for a token with
// agent globs (10)
//
// A token that sees only some agents lists conversations by reading the
// store's pages and filtering: at most ten pages per request, then a short
// page with a cursor to go on.
func TestFilteredConversationPagesBounded(t *testing.T) {
	_, srv := buildScoped(t, scopedYAML)
	runner, admin := clientWith(runnerToken), clientWith(adminToken)
	if code, body := call(t, runner, "POST", srv.URL+"/api/agents/support-a/execute", `{"input":"old","conversation_id":"new"}`); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	for range 12 { // newer than support-a's: listed first
		if code, body := call(t, admin, "POST", srv.URL+"/api/agents/billing/execute", `{"input":"x","conversation_id":"new"}`); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	var page struct {
		Conversations []json.RawMessage `json:"conversations"`
		Next          string            `json:"next"`
	}
	code, body := call(t, runner, "GET", srv.URL+"/api/conversations?limit=1", "")
	if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil {
		t.Fatalf("%d %s", code, body)
	}
	if len(page.Conversations) != 0 || page.Next == "" {
		t.Fatalf("after 10 store pages of billing: %s, want an empty page with a cursor", body)
	}
	code, body = call(t, runner, "GET", srv.URL+"/api/conversations?limit=1&cursor="+page.Next, "")
	if code != 200 || !strings.Contains(body, "support-a") {
		t.Fatalf("the next page: %d %s, want support-a's conversation", code, body)
	}
}

// A verdict needs the approve scope and names who gave it: the approver's
// verdict is "http:approver" in the answer and the ApprovalResolved event;
// a read token's verdict is 403; a token that does not see the agent sees
// no approval of it. An MCP session opened by one token is refused to
// another.
func TestVerdictsNameTheirToken(t *testing.T) {
	modelURL, mcpURL, _ := testutil.DeployPeers(t)
	rt, srv := buildScoped(t, `
server:
  api_token: `+adminToken+`
  max_auth_failures: -1
  tokens:
    - {name: reader, token: `+readerToken+`, scopes: [read]}
    - {name: approver, token: `+approverToken+`, scopes: [read, approve], agents: ["support-*"]}
    - {name: outsider, token: `+runnerToken+`, scopes: [read, approve], agents: ["billing"]}
providers:
  openai: { base_url: `+modelURL+`/v1, api_key: sk-test, max_retries: -1 }
mcp_servers:
  - { name: ops, url: `+mcpURL+`/mcp }
agents:
  - { id: support-a, provider: openai }
approval:
  default: prompt
  timeout: 2m
`)
	ctx := context.Background()
	sub, err := rt.Engine.Bus().Subscribe(lattice.Filter{Types: []string{"ApprovalResolved"}}, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	admin, reader, approver, outsider := clientWith(adminToken), clientWith(readerToken), clientWith(approverToken), clientWith(runnerToken)
	waitReady := time.Now().Add(60 * time.Second)
	for {
		if code, _ := call(t, http.DefaultClient, "GET", srv.URL+"/health/ready", ""); code == 200 {
			break
		}
		if time.Now().After(waitReady) {
			t.Fatal("not ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
	done := make(chan string, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/api/agents/support-a/execute", strings.NewReader(`{"input":"deploy"}`))
		resp, err := admin.Do(req)
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	var id string
	for deadline := time.Now().Add(60 * time.Second); id == ""; time.Sleep(50 * time.Millisecond) {
		_, body := call(t, approver, "GET", srv.URL+"/api/approvals", "")
		var list struct {
			Approvals []struct {
				ApprovalID string `json:"approval_id"`
			} `json:"approvals"`
		}
		_ = json.Unmarshal([]byte(body), &list)
		if len(list.Approvals) > 0 {
			id = list.Approvals[0].ApprovalID
		}
		if time.Now().After(deadline) {
			t.Fatal("no approval pending")
		}
	}
	if _, body := call(t, outsider, "GET", srv.URL+"/api/tools", ""); strings.Contains(body, "support-a") || strings.Contains(body, "mcp__ops__deploy") {
		t.Errorf("a billing-only token's /api/tools shows support-a's tools: %s", body)
	}
	if _, body := call(t, approver, "GET", srv.URL+"/api/tools", ""); !strings.Contains(body, "mcp__ops__deploy") {
		t.Errorf("the approver's /api/tools lacks support-a's tool: %s", body)
	}
	if _, body := call(t, outsider, "GET", srv.URL+"/api/approvals", ""); strings.Contains(body, id) {
		t.Errorf("a billing-only token sees support-a's approval: %s", body)
	}
	if code, body := call(t, outsider, "POST", srv.URL+"/api/approvals/"+id, `{"decision":"deny"}`); code != 404 {
		t.Errorf("a billing-only token's verdict: %d %s, want 404", code, body)
	}
	if code, body := call(t, reader, "POST", srv.URL+"/api/approvals/"+id, `{"decision":"deny"}`); code != 403 {
		t.Errorf("a read token's verdict: %d %s, want 403", code, body)
	}
	code, body := call(t, approver, "POST", srv.URL+"/api/approvals/"+id, `{"decision":"allow"}`)
	if code != 200 || !strings.Contains(body, `"resolved_by":"http:approver"`) {
		t.Fatalf("the approver's verdict: %d %s", code, body)
	}
	select {
	case ev := <-sub.Events():
		if !strings.Contains(string(ev.Payload), `"resolved_by":"http:approver"`) {
			t.Errorf("ApprovalResolved: %s", ev.Payload)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no ApprovalResolved event")
	}
	if out := <-done; !strings.Contains(out, `"status":"completed"`) {
		t.Errorf("the run after the verdict: %s", out)
	}

	// An MCP session is the token's that opened it.
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	mcpPost := func(c *http.Client, session, body string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := mcpPost(approver, "", initialize)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || session == "" {
		t.Fatalf("initialize: %d session %q", resp.StatusCode, session)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if resp := mcpPost(reader, session, list); resp.StatusCode != http.StatusForbidden {
		t.Errorf("another token on the approver's session: %d, want 403", resp.StatusCode)
	}
}

// Bad server.tokens and server.auth entries are refused with their key and
// line, and a token's value never appears in the message.
func TestAuthConfigErrors(t *testing.T) {
	_, err := config.ParseWith(context.Background(), "bad.yaml", []byte(`
server:
  api_token: `+adminToken+`
  tokens:
    - {name: a, token: short-secret-x, scopes: [read]}
    - {name: a, token: `+adminToken+`, scopes: [Read]}
    - {name: "", token: `+runnerToken+`, scopes: [], agents: ["[bad"]}
  auth:
    oauth:
      issuer: not-a-url
`), env(nil))
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		"server.tokens[0].token", "at least 16",
		"server.tokens[1].name", "is taken",
		"server.tokens[1].token", "same as another token",
		"server.tokens[1].scopes[0]", `"Read" is not a scope`,
		"server.tokens[2].name", "server.tokens[2].scopes", "server.tokens[2].agents[0]",
		"server.auth.oauth.issuer", "server.auth.oauth.audience",
		"bad.yaml:5", // the line of tokens[0]
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	for _, secret := range []string{"short-secret-x", adminToken, runnerToken} {
		if strings.Contains(msg, secret) {
			t.Errorf("error shows a token:\n%s", msg)
		}
	}
}
