package axocoatl

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/axocoatl/axocoatl-go/internal/httpguard"
)

// The scopes a caller's credentials can carry ([Identity].Scopes) and a
// [Route] can ask for. ScopeAdmin implies every other scope; the others
// are independent (a token that reads and runs lists both).
const (
	// ScopeRead: list and read agents, tools, conversations, events,
	// approvals waiting and remembered decisions, metrics.
	ScopeRead Scope = "read"
	// ScopeExecute: run agents (every door's execute, A2A sends, MCP
	// tools/call) and delete conversations.
	ScopeExecute Scope = "execute"
	// ScopeApprove: give verdicts on tool calls waiting for a human and
	// forget remembered decisions.
	ScopeApprove Scope = "approve"
	// ScopeAdmin: everything, the routes that ask for no finer scope (the
	// zero [ScopeToken]) among them; what server.api_token carries.
	ScopeAdmin Scope = "admin"
)

// ErrForbidden: the caller's [Identity] lacks the scope an action needs
// (a run without [ScopeExecute]); doors answer it 403.
var ErrForbidden = errors.New("forbidden")

// Scopes lists the scopes a credential can carry, in the order docs give.
func Scopes() []Scope { return []Scope{ScopeRead, ScopeExecute, ScopeApprove, ScopeAdmin} }

// Identity is who a request's credentials say the caller is, as the HTTP
// guard found it: the one type every door and gate reads (through
// [IdentityFrom]) to decide what the caller may see and do, and to say who
// did something (a verdict's "by"). A nil *Identity is an unrestricted
// caller: a Go call, or a server without any credentials configured.
type Identity struct {
	// Name names the credential: a server.tokens name, "api_token", or
	// "jwt:<sub>" for an OAuth access token.
	Name string `json:"name"`
	// Subject is the JWT's sub claim ("" for static tokens).
	Subject string `json:"subject,omitempty"`
	// Scopes are what the credential may do (see [ScopeRead]…).
	Scopes []Scope `json:"scopes"`
	// Agents are path.Match globs of the agent ids the caller sees and
	// runs; empty: every agent.
	Agents []string `json:"agents,omitempty"`
}

// Can reports whether the identity carries scope s (ScopeAdmin carries
// every scope; the zero [ScopeToken] needs ScopeAdmin; [ScopePublic] needs
// nothing). A nil identity can do everything.
func (id *Identity) Can(s Scope) bool {
	if id == nil || s == ScopePublic {
		return true
	}
	return httpguard.HasScope(id.Scopes, string(s))
}

// SeesAgent reports whether the identity's agent globs admit agentID (a
// nil identity, or one without globs, sees every agent).
func (id *Identity) SeesAgent(agentID string) bool {
	return id == nil || httpguard.MatchAgent(id.Agents, agentID)
}

// Restricted reports whether the identity sees only some agents.
func (id *Identity) Restricted() bool { return id != nil && len(id.Agents) > 0 }

// String names the identity for logs and events ("" for a nil one).
func (id *Identity) String() string {
	if id == nil {
		return ""
	}
	return id.Name
}

type identityKey struct{}

// WithIdentity returns ctx carrying id: the guard binds it to every request
// it admits, and a door that runs work on a context of its own (an A2A task
// outliving its request) carries it over.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	if id == nil {
		return ctx
	}
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom is the identity ctx carries, or nil (unrestricted).
func IdentityFrom(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey{}).(*Identity)
	return id
}

// AgentFor is [Engine.Agent] as the caller of ctx sees it: an agent its
// identity's globs leave out is [ErrAgentNotFound], as if it did not exist.
func (e *Engine) AgentFor(ctx context.Context, id string) (AgentInfo, error) {
	if !IdentityFrom(ctx).SeesAgent(id) {
		return AgentInfo{}, fmt.Errorf("%w: %q", ErrAgentNotFound, id)
	}
	return e.Agent(id)
}

// AgentsFor is [Engine.Agents] as the caller of ctx sees it.
func (e *Engine) AgentsFor(ctx context.Context) []AgentInfo {
	all := e.Agents()
	id := IdentityFrom(ctx)
	if !id.Restricted() {
		return all
	}
	return slices.DeleteFunc(all, func(a AgentInfo) bool { return !id.SeesAgent(a.ID) })
}

func identityOf(p *httpguard.Principal) *Identity {
	if p == nil {
		return nil
	}
	id := &Identity{Name: p.Name, Subject: p.Subject, Agents: p.Agents}
	for _, s := range p.Scopes {
		id.Scopes = append(id.Scopes, Scope(s))
	}
	return id
}
