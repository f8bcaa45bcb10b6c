package mcpclient

import (
	"context"
	"net/url"
	"strings"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/internal/httpheader"
	"github.com/axocoatl/axocoatl-go/internal/redact"
	"github.com/axocoatl/axocoatl-go/secret"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults applied where a [Config] or [ServerConfig] field is zero.
const (
	DefaultTimeout     = 60 * time.Second
	DefaultMinBackoff  = 250 * time.Millisecond
	DefaultMaxBackoff  = 30 * time.Second
	DefaultStopTimeout = 2 * time.Second
	DefaultKeepAlive   = 30 * time.Second

	// DefaultMaxTools bounds the tools one server may list. Far more than
	// a model can use: OpenAI accepts 128 tool definitions per request.
	DefaultMaxTools = 1000
	// DefaultMaxListPages bounds the pages of one tools/list (a server that
	// returns nextCursor forever).
	DefaultMaxListPages = 100
	// DefaultMaxListBytes bounds one server's listing: the JSON of every
	// tool's name, description, input schema and annotations, together.
	DefaultMaxListBytes = 8 << 20

	// RelistInterval is the least time between two re-lists of a server's
	// tools after notifications/tools/list_changed: notifications that
	// arrive meanwhile are merged into the next one, so a server sending
	// thousands a second costs at most one listing a second.
	RelistInterval = time.Second
)

// Approval decisions a server's `approval:` may carry.
const (
	ApprovalPrompt = axocoatl.ApprovalPrompt
	ApprovalAllow  = axocoatl.ApprovalAllow
	ApprovalDeny   = axocoatl.ApprovalDeny
)

// Config configures the module ([New]). The zero value connects to no server.
type Config struct {
	// Servers are the `mcp_servers:` entries of the config file.
	Servers []ServerConfig `yaml:"mcp_servers"`
	// MinBackoff is the first delay before reconnecting a server whose
	// session ended or whose connect failed. Zero: 250ms.
	MinBackoff time.Duration `yaml:"min_backoff"`
	// MaxBackoff caps the doubling reconnect delay (each delay gets ±20%
	// jitter). Zero: 30s.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// Scrub lists the host's own credentials (its API token, model
	// provider keys, other servers' env and headers). A stdio server that
	// inherits the environment can read those that came from it, and any
	// server may echo what it was sent: they are removed, like each
	// server's own env and header values, from all a server says (stderr,
	// errors, every tool result, successful or failed, logs). Values under
	// [MinRedactLen] characters cannot be redacted and are warned about.
	// Set by the host, not read from the config file. Zero: none.
	Scrub []secret.Secret `yaml:"-"`

	// Tokens keeps the OAuth tokens of the servers with `oauth:` between
	// runs (the daemon's: a [FileTokenStore] in data_dir). Set by the host.
	// Zero: tokens in memory only (a restart needs a new login).
	Tokens TokenStore `yaml:"-"`
	// RedirectURL is the OAuth redirect of servers whose `oauth:` sets
	// none (the daemon's /oauth/callback). Set by the host. Zero: none.
	RedirectURL string `yaml:"-"`
	// FetchCode gets an authorization code when a session finds it needs
	// one (its token refused, no refresh possible) and no [Module.Login]
	// runs. Set by the host (tests, the conformance suite's client). Zero:
	// the server shows [ErrNeedsLogin] until someone logs in.
	FetchCode CodeFetcher `yaml:"-"`
}

// ServerConfig is one entry of [Config].Servers (`mcp_servers:`). Exactly one of Command (stdio)
// and URL (streamable HTTP) is set, unless Dial is.
type ServerConfig struct {
	// Name identifies the server in tool names (mcp__<name>__<tool>), events
	// and logs: [a-z0-9_-]+, at most 64 characters, unique. Required.
	Name string `yaml:"name"`

	// Command starts the server as a child process speaking MCP over
	// stdin/stdout. Zero: not a stdio server.
	Command string `yaml:"command"`
	// Args are the command's arguments. Zero: none.
	Args []string `yaml:"args"`
	// Env is layered onto the child's environment. Values are secrets: they
	// never appear in logs or errors. Zero: nothing added.
	Env map[string]secret.Secret `yaml:"env"`
	// InheritEnv says whether the child inherits the daemon's environment.
	// Zero (nil): true. False: the child sees only PATH, HOME and Env.
	InheritEnv *bool `yaml:"inherit_env"`

	// URL is the streamable HTTP endpoint (http or https). Zero: not an
	// HTTP server.
	URL string `yaml:"url"`
	// Headers are sent with every HTTP request to URL. Values are secrets.
	// Zero: none.
	Headers map[string]secret.Secret `yaml:"headers"`
	// OAuth makes the client authorize with OAuth 2.1, as the MCP
	// authorization spec says (see [OAuthConfig]). HTTP servers only.
	// Zero: no OAuth (static headers only).
	OAuth *OAuthConfig `yaml:"oauth"`

	// Timeout bounds each tool call, and also the connect handshake and each
	// tool listing. Zero: 60s.
	Timeout time.Duration `yaml:"timeout"`
	// KeepAlive is how often the session is checked. A server that is alive
	// but stops answering (a hung child, a proxy that swallows requests)
	// fails its check within half the interval; after two failed checks in
	// a row the session is closed and reconnected like a dead one. The
	// check is a ping in the 2025-11-25 era; the 2026-07-28 era has no
	// ping, so there it is a tools/list, whose answer also registers any
	// change a lost tools/list_changed did not announce. Zero: 30s.
	// Negative: no checks.
	KeepAlive time.Duration `yaml:"keep_alive"`
	// Approval is the decision for this server's tools (prompt, allow,
	// deny), set on each of its Engine tools ([axocoatl.Tool].Approval) for
	// gates to read. Zero: the gate's default.
	Approval string `yaml:"approval"`

	// MaxTools bounds the tools the server may list. A server listing more
	// is disconnected with an error naming the bound (and reconnected with
	// backoff); the other servers are not affected. Zero: 1000.
	MaxTools int `yaml:"max_tools"`
	// MaxListPages bounds the pages of one tools/list. Zero: 100.
	MaxListPages int `yaml:"max_list_pages"`
	// MaxListBytes bounds the whole listing: the JSON of every tool's name,
	// description, input schema and annotations. Zero: 8 MiB.
	MaxListBytes int `yaml:"max_list_bytes"`

	// Dial, when set, makes the transport of each connection attempt instead
	// of Command or URL: for servers embedded in the host and for tests.
	Dial func(ctx context.Context) (mcp.Transport, error) `yaml:"-"`
}

// Transport names how the server is reached: "stdio", "http" or "custom".
func (s ServerConfig) Transport() string {
	switch {
	case s.Dial != nil:
		return "custom"
	case s.Command != "":
		return "stdio"
	case s.URL != "":
		return "http"
	}
	return ""
}

func (s ServerConfig) timeout() time.Duration {
	if s.Timeout == 0 {
		return DefaultTimeout
	}
	return s.Timeout
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func (s ServerConfig) maxTools() int     { return orDefault(s.MaxTools, DefaultMaxTools) }
func (s ServerConfig) maxListPages() int { return orDefault(s.MaxListPages, DefaultMaxListPages) }
func (s ServerConfig) maxListBytes() int { return orDefault(s.MaxListBytes, DefaultMaxListBytes) }

func (s ServerConfig) keepAlive() time.Duration {
	switch {
	case s.KeepAlive == 0:
		return DefaultKeepAlive
	case s.KeepAlive < 0:
		return 0 // the SDK's "off"
	}
	return s.KeepAlive
}

func (s ServerConfig) inheritEnv() bool { return s.InheritEnv == nil || *s.InheritEnv }

// ErrInvalidConfig is [axocoatl.ErrInvalidConfig], kept under this name
// for the callers that check errors.Is(err, mcpclient.ErrInvalidConfig).
var ErrInvalidConfig = axocoatl.ErrInvalidConfig

// Validate checks one server entry. Errors are [*axocoatl.ConfigError] values
// naming the key, never a secret value.
func (s ServerConfig) Validate() error {
	bad := cfgerr.Errorf
	if s.Name == "" {
		return bad("", "name is required")
	}
	if !agent.ValidID(s.Name) {
		return bad("name", "%q must match [a-z0-9_-]+ (at most 64 characters)", s.Name)
	}
	switch {
	case s.Dial != nil:
	case s.Command != "" && s.URL != "":
		return bad("", "set either command (stdio) or url (streamable HTTP), not both")
	case s.Command == "" && s.URL == "":
		return bad("", "command (stdio) or url (streamable HTTP) is required")
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil {
			return bad("url", "cannot parse %q", redactURL(s.URL))
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("url", "%q must be an absolute http or https URL", redactURL(s.URL))
		}
	}
	if s.Command == "" && s.Dial == nil {
		if len(s.Args) > 0 {
			return bad("args", "need command")
		}
		if len(s.Env) > 0 {
			return bad("env", "applies to stdio servers only (set command)")
		}
		if s.InheritEnv != nil {
			return bad("inherit_env", "applies to stdio servers only (set command)")
		}
	}
	if s.URL == "" && len(s.Headers) > 0 && s.Dial == nil {
		return bad("headers", "apply to HTTP servers only (set url)")
	}
	if s.OAuth != nil {
		if s.URL == "" {
			return bad("oauth", "applies to HTTP servers only (set url)")
		}
		for k := range s.Headers {
			if strings.EqualFold(k, "Authorization") {
				return bad("headers", "Authorization is set by oauth: set one of them")
			}
		}
		if err := s.OAuth.validate(); err != nil {
			return cfgerr.At("oauth", err)
		}
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return bad("env", "invalid variable name %q", k)
		}
	}
	for k, v := range s.Headers {
		if p := httpheader.Problem(k, v.Reveal()); p != "" {
			return bad("headers", "%s", p)
		}
	}
	if err := cfgerr.NotNegative(cfgerr.N("timeout", s.Timeout), cfgerr.N("max_tools", s.MaxTools),
		cfgerr.N("max_list_pages", s.MaxListPages), cfgerr.N("max_list_bytes", s.MaxListBytes)); err != nil {
		return err
	}
	if !axocoatl.ValidApproval(s.Approval) {
		return bad("approval", "%q must be prompt, allow or deny", s.Approval)
	}
	return nil
}

// Validate checks every server and that names are unique. Errors are
// [*axocoatl.ConfigError] values keyed "mcp_servers[i].<key>".
func (c Config) Validate() error {
	if c.MinBackoff < 0 || c.MaxBackoff < 0 {
		return cfgerr.Errorf("", "backoff must not be negative")
	}
	if err := cfgerr.Entries("mcp_servers", c.Servers); err != nil {
		return err
	}
	return cfgerr.At("mcp_servers", ValidateNames(c.Servers))
}

// ValidateNames reports a server name used twice (the message names the
// entries, not the section).
func ValidateNames(servers []ServerConfig) error {
	return cfgerr.UniqueNames(servers, func(s ServerConfig) string { return s.Name })
}

func (c Config) withDefaults() Config {
	if c.MinBackoff == 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = c.MinBackoff
	}
	return c
}

// redactURL is the one URL redaction every package uses: userinfo, query
// and key-like path segments hidden (hosted MCP servers put the account key
// in the path: /mcp/<key>/sse).
func redactURL(raw string) string { return redact.URL(raw) }

// Target says where the server is, for logs and doctor: the command (no
// args, no env) or the URL without userinfo, query or key-like path
// segments.
func (s ServerConfig) Target() string {
	switch s.Transport() {
	case "stdio":
		return s.Command
	case "http":
		return redactURL(s.URL)
	}
	return ""
}
