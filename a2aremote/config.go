package a2aremote

import (
	"net/url"
	"strings"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/internal/httpheader"
	"github.com/axocoatl/axocoatl-go/internal/redact"
	"github.com/axocoatl/axocoatl-go/internal/textsafe"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Defaults applied where a [Config] or [AgentConfig] field is zero.
const (
	DefaultTimeout    = 120 * time.Second
	DefaultMinBackoff = 250 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second

	// DefaultMaxResponseBytes bounds the bytes read from one HTTP response
	// of a remote agent (one answer, or one whole SSE stream).
	DefaultMaxResponseBytes = 8 << 20
	// DefaultMaxCardBytes bounds the agent card read at resolve time.
	DefaultMaxCardBytes = 1 << 20
	// DefaultMaxOutputBytes bounds the text of one call's result handed to
	// the model; more is cut on a UTF-8 boundary with a note saying so.
	DefaultMaxOutputBytes = 64 << 10
	// DefaultMaxConcurrent bounds the calls in flight to one remote agent;
	// more wait (within their timeout) for a slot.
	DefaultMaxConcurrent = 16

	// CancelTimeout bounds the [a2aclient.Client.CancelTask] sent when a call
	// is abandoned.
	CancelTimeout = 5 * time.Second
	// ResolveTimeout bounds one attempt at reading the agent card.
	ResolveTimeout = 10 * time.Second
	// maxDescription bounds the tool description built from the card.
	maxDescription = 2048
)

// Approval decisions an agent's `approval:` may carry.
const (
	ApprovalPrompt = axocoatl.ApprovalPrompt
	ApprovalAllow  = axocoatl.ApprovalAllow
	ApprovalDeny   = axocoatl.ApprovalDeny
)

// Config configures the module ([New]). The zero value calls no remote agent.
type Config struct {
	// Agents are the `a2a_agents:` entries of the config file.
	Agents []AgentConfig `yaml:"a2a_agents"`
	// MinBackoff is the first delay before reading an unreachable agent's
	// card again. Zero: 250ms.
	MinBackoff time.Duration `yaml:"min_backoff"`
	// MaxBackoff caps the doubling delay between card attempts (each delay
	// gets ±20% jitter). Zero: 30s.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// Scrub lists the host's own credentials (API token, provider keys,
	// other sections' secrets): a remote may echo what it was sent, so they
	// are removed, like each agent's own header values, from every result,
	// error, event and log line. Set by the host, not read from the file.
	// Zero: only the agents' own header values.
	Scrub []secret.Secret `yaml:"-"`
}

// AgentConfig is one entry of [Config].Agents (`a2a_agents:`).
type AgentConfig struct {
	// Name makes the tool name a2a__<name>: [a-z0-9_-]+, at most 59
	// characters (the tool name stays within [MaxToolNameLen]), unique.
	// Required.
	Name string `yaml:"name"`
	// URL is the agent's base URL (its card is read at
	// <url>/.well-known/agent-card.json) or, when the path ends in
	// ".json", the URL of the card itself. http or https. Required.
	URL string `yaml:"url"`
	// Headers are sent with every request to the agent (the card too).
	// Values are secrets: never logged, never in errors. Zero: none.
	Headers map[string]secret.Secret `yaml:"headers"`
	// Timeout bounds each call, from sending the message to the remote
	// task's end. Zero: 120s.
	Timeout time.Duration `yaml:"timeout"`
	// Approval is the decision gates apply to this agent's tool (prompt,
	// allow, deny), set on the Engine tool ([axocoatl.Tool].Approval).
	// Zero: the gate's default.
	Approval string `yaml:"approval"`
	// MaxResponseBytes bounds one HTTP response read from the agent.
	// Zero: 8 MiB.
	MaxResponseBytes int `yaml:"max_response_bytes"`
	// MaxOutputBytes bounds the text of one result given to the model.
	// Zero: 64 KiB.
	MaxOutputBytes int `yaml:"max_output_bytes"`
	// MaxConcurrent bounds the calls in flight to this agent. Zero: 16.
	MaxConcurrent int `yaml:"max_concurrent"`
}

// ToolName is the Engine tool of the agent: a2a__<name> ([ToolPrefix]).
func (a AgentConfig) ToolName() string { return ToolPrefix + a.Name }

// ToolPrefix starts the name of every tool this module registers.
const ToolPrefix = "a2a__"

// MaxToolNameLen is the longest tool name: most model APIs reject longer
// tool names (OpenAI's and Anthropic's limit), so a name has at most 59
// characters.
const MaxToolNameLen = 64

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

func (a AgentConfig) timeout() time.Duration { return orDefault(a.Timeout, DefaultTimeout) }
func (a AgentConfig) maxResponse() int       { return orDefault(a.MaxResponseBytes, DefaultMaxResponseBytes) }
func (a AgentConfig) maxOutput() int         { return orDefault(a.MaxOutputBytes, DefaultMaxOutputBytes) }
func (a AgentConfig) maxConcurrent() int     { return orDefault(a.MaxConcurrent, DefaultMaxConcurrent) }
func (c Config) minBackoff() time.Duration   { return orDefault(c.MinBackoff, DefaultMinBackoff) }
func (c Config) maxBackoff() time.Duration {
	return max(orDefault(c.MaxBackoff, DefaultMaxBackoff), c.minBackoff())
}
func (a AgentConfig) cardURL() (string, error) { return CardURL(a.URL) }

// CardURL is where the card of an agent configured with raw is read: raw
// itself when its path ends in ".json", else raw's
// /.well-known/agent-card.json.
func CardURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if strings.HasSuffix(u.Path, ".json") {
		return raw, nil
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/.well-known/agent-card.json"
	u.RawPath = ""
	return u.String(), nil
}

// ErrInvalidConfig is [axocoatl.ErrInvalidConfig], kept under this name
// for the callers that check errors.Is(err, a2aremote.ErrInvalidConfig).
var ErrInvalidConfig = axocoatl.ErrInvalidConfig

// Validate checks one entry. Errors are [*axocoatl.ConfigError] values naming the
// key, never a secret value.
func (a AgentConfig) Validate() error {
	bad := cfgerr.Errorf
	if a.Name == "" {
		return bad("", "name is required")
	}
	if !agent.ValidID(a.Name) || len(a.ToolName()) > MaxToolNameLen {
		return bad("name", "%q must match [a-z0-9_-]+ and have at most %d characters (the tool name %s<name> must stay within the %d characters model APIs accept)",
			textsafe.Cut(a.Name, 80), MaxToolNameLen-len(ToolPrefix), ToolPrefix, MaxToolNameLen)
	}
	if a.URL == "" {
		return bad("", "url is required (the agent's base URL or its card's URL)")
	}
	u, err := url.Parse(a.URL)
	if err != nil {
		return bad("url", "cannot parse %q", redact.URL(a.URL))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("url", "%q must be an absolute http or https URL", redact.URL(a.URL))
	}
	for k, v := range a.Headers {
		if p := httpheader.Problem(k, v.Reveal()); p != "" {
			return bad("headers", "%s", p)
		}
	}
	if err := cfgerr.NotNegative(cfgerr.N("timeout", a.Timeout), cfgerr.N("max_response_bytes", a.MaxResponseBytes),
		cfgerr.N("max_output_bytes", a.MaxOutputBytes), cfgerr.N("max_concurrent", a.MaxConcurrent)); err != nil {
		return err
	}
	if !axocoatl.ValidApproval(a.Approval) {
		return bad("approval", "%q must be prompt, allow or deny", a.Approval)
	}
	return nil
}

// Validate checks every agent and that names are unique. Errors are
// [*axocoatl.ConfigError] values keyed "a2a_agents[i].<key>".
func (c Config) Validate() error {
	if c.MinBackoff < 0 || c.MaxBackoff < 0 {
		return cfgerr.Errorf("", "backoff must not be negative")
	}
	if err := cfgerr.Entries("a2a_agents", c.Agents); err != nil {
		return err
	}
	return cfgerr.At("a2a_agents", ValidateNames(c.Agents))
}

// ValidateNames reports a name used twice (the message names the entries,
// not the section).
func ValidateNames(agents []AgentConfig) error {
	return cfgerr.UniqueNames(agents, func(a AgentConfig) string { return a.Name })
}

// Target is the agent's URL as logs and doctor show it: no userinfo, no
// query, key-like path segments masked.
func (a AgentConfig) Target() string { return redact.URL(a.URL) }
