package httpguard

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"net/http"
	"path"
	"strings"

	"github.com/axocoatl/axocoatl-go/secret"
)

// The scope names the guard knows. ScopeAdmin carries every scope, and a
// route asking for no scope ("") asks for ScopeAdmin; ScopePublic asks for
// nothing.
const (
	ScopePublic  = "public"
	ScopeRead    = "read"
	ScopeExecute = "execute"
	ScopeApprove = "approve"
	ScopeAdmin   = "admin"
)

// KnownScope reports whether s is a scope a credential can carry.
func KnownScope(s string) bool {
	switch s {
	case ScopeRead, ScopeExecute, ScopeApprove, ScopeAdmin:
		return true
	}
	return false
}

// Credential is one static token (server.tokens) with what it may do.
type Credential struct {
	Name   string
	Token  secret.Secret
	Scopes []string
	// Agents are path.Match globs of agent ids; empty: every agent.
	Agents []string
}

// Principal is who a request's credentials name: the guard binds it to
// the request through Options.Bind.
type Principal struct {
	Name    string
	Subject string
	Scopes  []string
	Agents  []string
}

// APITokenName names the principal of Options.Token.
const APITokenName = "api_token"

// HasScope reports whether have carries need (admin carries all; "" needs
// admin; public needs nothing).
func HasScope[S ~string](have []S, need string) bool {
	if need == ScopePublic {
		return true
	}
	if need == "" {
		need = ScopeAdmin
	}
	for _, s := range have {
		if string(s) == need || string(s) == ScopeAdmin {
			return true
		}
	}
	return false
}

// MatchAgent reports whether one of globs (path.Match syntax) matches id;
// no globs match every id.
func MatchAgent(globs []string, id string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, id); ok {
			return true
		}
	}
	return false
}

// ValidateCredentials checks names (non-empty, unique), tokens (at least
// MinTokenLength, no whitespace, unique, not the api_token), scopes
// (known, at least one) and agent globs (valid path.Match patterns). Keys
// are tokens[i].field.
func ValidateCredentials(creds []Credential, apiToken secret.Secret) error {
	var errs []error
	names := map[string]bool{APITokenName: true}
	tokens := map[string]bool{}
	if !apiToken.IsZero() {
		tokens[apiToken.Reveal()] = true
	}
	for i, c := range creds {
		key := fmt.Sprintf("tokens[%d]", i)
		switch {
		case c.Name == "":
			errs = append(errs, cfgerr.Errorf(key+".name", "must be set (it names the token in logs and verdicts)"))
		case names[c.Name]:
			errs = append(errs, cfgerr.Errorf(key+".name", "%q is taken (names are unique, and %q names server.api_token)", c.Name, APITokenName))
		case strings.ContainsAny(c.Name, " \t\r\n:"):
			errs = append(errs, cfgerr.Errorf(key+".name", "%q must not contain whitespace or ':'", c.Name))
		}
		names[c.Name] = true
		tok := c.Token.Reveal()
		switch {
		case tok == "":
			errs = append(errs, cfgerr.Errorf(key+".token", "must be set"))
		case strings.ContainsAny(tok, " \t\r\n"):
			errs = append(errs, cfgerr.Errorf(key+".token", "must not contain whitespace"))
		case len(tok) < MinTokenLength:
			errs = append(errs, cfgerr.Errorf(key+".token", "is %d characters long: use at least %d (for example the output of `openssl rand -hex 24`)", len(tok), MinTokenLength))
		case tokens[tok]:
			errs = append(errs, cfgerr.Errorf(key+".token", "is the same as another token (each token names one caller)"))
		}
		tokens[tok] = true
		if len(c.Scopes) == 0 {
			errs = append(errs, cfgerr.Errorf(key+".scopes", "must list at least one of read, execute, approve, admin"))
		}
		for j, s := range c.Scopes {
			if !KnownScope(s) {
				errs = append(errs, cfgerr.Errorf(fmt.Sprintf("%s.scopes[%d]", key, j), "%q is not a scope (read, execute, approve, admin)", s))
			}
		}
		for j, g := range c.Agents {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				errs = append(errs, cfgerr.Errorf(fmt.Sprintf("%s.agents[%d]", key, j), "%q is not a glob (path.Match syntax: *, ?, [a-z])", g))
			}
		}
	}
	return errors.Join(errs...)
}

// credential is a Credential as the guard keeps it: the token's digest.
type credential struct {
	digest    [32]byte
	principal *Principal
}

func newCredentials(apiToken secret.Secret, creds []Credential) []credential {
	var out []credential
	if !apiToken.IsZero() {
		out = append(out, credential{sha256.Sum256([]byte(apiToken.Reveal())),
			&Principal{Name: APITokenName, Scopes: []string{ScopeAdmin}}})
	}
	for _, c := range creds {
		if c.Token.IsZero() {
			continue
		}
		out = append(out, credential{sha256.Sum256([]byte(c.Token.Reveal())),
			&Principal{Name: c.Name, Scopes: append([]string(nil), c.Scopes...), Agents: append([]string(nil), c.Agents...)}})
	}
	return out
}

// lookup finds presented among the static credentials, comparing the
// digests in constant time and against every one (no early exit).
func (g *Guard) lookup(presented string) *Principal {
	if presented == "" {
		return nil
	}
	d := sha256.Sum256([]byte(presented))
	var found *Principal
	for i := range g.creds {
		if subtle.ConstantTimeCompare(d[:], g.creds[i].digest[:]) == 1 {
			found = g.creds[i].principal
		}
	}
	return found
}

// authFailure is a refused credential: the status, the code and message of
// the JSON error, and for a Bearer challenge the RFC 6750 error and scope.
type authFailure struct {
	status         int
	code, msg      string
	bearerErr      string // "invalid_token", "insufficient_scope" or ""
	bearerDesc     string
	scope          string
	retryAfterSecs int
}

// challenge is the WWW-Authenticate value for f on r.
func (g *Guard) challenge(r *http.Request, f *authFailure) string {
	var b strings.Builder
	b.WriteString(`Bearer realm="axocoatl"`)
	if g.oauth != nil {
		fmt.Fprintf(&b, `, resource_metadata="%s"`, g.ResourceMetadataURL(r))
	}
	if f.bearerErr != "" {
		fmt.Fprintf(&b, `, error="%s"`, f.bearerErr)
		if f.bearerDesc != "" {
			fmt.Fprintf(&b, `, error_description="%s"`, strings.NewReplacer(`"`, "'", `\`, "/").Replace(f.bearerDesc))
		}
	}
	if f.scope != "" {
		fmt.Fprintf(&b, `, scope="%s"`, f.scope)
	}
	return b.String()
}

// WellKnownResource is where the protected resource metadata (RFC 9728)
// of the host's root is served; a door at /mcp has its own at
// WellKnownResource + "/mcp".
const WellKnownResource = "/.well-known/oauth-protected-resource"

// ResourceOf is the resource a request's path belongs to, as a path: the
// path itself when it ends in /mcp (an MCP server is a resource of its
// own, as MCP clients expect), else "" (the host's root).
func ResourceOf(p string) string {
	p = strings.TrimRight(p, "/")
	if p == "/mcp" || strings.HasSuffix(p, "/mcp") {
		return p
	}
	return ""
}

// BaseURL is PublicURL, or the request's scheme and Host without one.
func (g *Guard) BaseURL(r *http.Request) string {
	if g.publicURL != "" {
		return g.publicURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// ResourceMetadataURL is the metadata URL of the resource r is for.
func (g *Guard) ResourceMetadataURL(r *http.Request) string {
	base := g.BaseURL(r)
	host := base
	prefix := ""
	if i := strings.Index(base, "://"); i >= 0 {
		if j := strings.IndexByte(base[i+3:], '/'); j >= 0 {
			host, prefix = base[:i+3+j], base[i+3+j:]
		}
	}
	res := ResourceOf(r.URL.Path)
	if prefix != "" && strings.HasPrefix(res, prefix) {
		res = strings.TrimPrefix(res, prefix)
	}
	return host + WellKnownResource + prefix + res
}
