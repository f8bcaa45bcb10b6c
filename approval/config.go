package approval

import (
	"fmt"
	"log/slog"
	"path"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
)

// Decisions: what the policy says about a call, and what a human answers.
const (
	Prompt = axocoatl.ApprovalPrompt // ask a human
	Allow  = axocoatl.ApprovalAllow  // run the call
	Deny   = axocoatl.ApprovalDeny   // refuse the call
)

// How long a verdict applies.
const (
	Once   = "once"   // this call only
	Always = "always" // this call and every later one of the tool by the agent
)

// Statuses of a resolved approval (ApprovalResolved's "status").
const (
	StatusApproved  = "approved"  // a human allowed it
	StatusDenied    = "denied"    // a human denied it
	StatusExpired   = "expired"   // nobody answered within the timeout: denied
	StatusWithdrawn = "withdrawn" // the run ended (cancelled, its door's deadline, shutdown): not run
	// StatusUnanswerable: no channel could answer it (no door's prompter
	// could ask, and the host declared no other channel): denied at once.
	StatusUnanswerable = "unanswerable"
)

// DefaultTimeout is how long a call waits for a verdict when
// [Config].Timeout is zero.
const DefaultTimeout = 5 * time.Minute

// Config is the `approval:` section of the config file. The zero value
// prompts for every call whose tool's source sets no policy, waits 5
// minutes, and keeps remembered decisions in memory only.
type Config struct {
	// Default is the decision for a call no remembered decision, rule or
	// tool source decides: prompt, allow or deny. Zero: prompt.
	Default string `yaml:"default"`
	// Timeout is how long a call waits for a verdict; unanswered, it is
	// denied with status "expired". Zero: 5m.
	Timeout time.Duration `yaml:"timeout"`
	// Rules are tried in order; the first that matches a call decides it.
	// Zero: none.
	Rules []Rule `yaml:"rules"`
	// DataDir is where remembered ("always") decisions are kept, in
	// approvals.json, written atomically. Set by the host (the daemon passes
	// its data dir), not read from the config file. Zero: remembered
	// decisions last until the module stops.
	DataDir string `yaml:"-"`
	// Logger receives the audit trail (one line per request and outcome).
	// Zero: the Engine's logger.
	Logger *slog.Logger `yaml:"-"`
}

// Rule decides the calls of the tools it matches.
type Rule struct {
	// Tool is a glob (path.Match syntax) over qualified tool names, e.g.
	// "mcp__fs__read_*". Required.
	Tool string `yaml:"tool" json:"tool"`
	// ReadOnly, when set, also requires the tool's readOnlyHint annotation
	// to have this value (a tool without annotations is not read-only).
	// Zero (nil): any.
	ReadOnly *bool `yaml:"read_only,omitempty" json:"read_only,omitempty"`
	// Destructive, when set, also requires the tool's destructiveHint
	// (default true, as the MCP spec says) to have this value. Zero: any.
	Destructive *bool `yaml:"destructive,omitempty" json:"destructive,omitempty"`
	// Idempotent, when set, also requires idempotentHint (default false).
	// Zero: any.
	Idempotent *bool `yaml:"idempotent,omitempty" json:"idempotent,omitempty"`
	// OpenWorld, when set, also requires openWorldHint (default true).
	// Zero: any.
	OpenWorld *bool `yaml:"open_world,omitempty" json:"open_world,omitempty"`
	// Decision is prompt, allow or deny. Required.
	Decision string `yaml:"decision" json:"decision"`
}

// ErrInvalidConfig is [axocoatl.ErrInvalidConfig], kept under this name
// for the callers that check errors.Is(err, approval.ErrInvalidConfig).
var ErrInvalidConfig = axocoatl.ErrInvalidConfig

func validDecision(d string) bool { return d != "" && axocoatl.ValidApproval(d) }

// Validate checks the config. Each of its errors is an
// [*axocoatl.ConfigError] naming the key ("rules[2].decision: …").
func (c Config) Validate() error {
	bad := cfgerr.Errorf
	if c.Default != "" && !validDecision(c.Default) {
		return bad("default", "%q is not a decision (prompt, allow or deny)", c.Default)
	}
	if c.Timeout < 0 {
		return bad("timeout", "%s must not be negative", c.Timeout)
	}
	for i, r := range c.Rules {
		at := fmt.Sprintf("rules[%d]", i)
		if r.Tool == "" {
			return bad(at, "tool is required")
		}
		if _, err := path.Match(r.Tool, ""); err != nil {
			return bad(at+".tool", "bad glob %q", r.Tool)
		}
		if r.Decision == "" {
			return bad(at, "decision is required (prompt, allow or deny)")
		}
		if !validDecision(r.Decision) {
			return bad(at+".decision", "%q is not a decision (prompt, allow or deny)", r.Decision)
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Default == "" {
		c.Default = Prompt
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}
