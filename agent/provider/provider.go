// Package provider builds agent.Models from the config's `providers:` section:
// the offline echo model, any OpenAI-compatible Chat Completions server
// (openai, ollama) and the Anthropic Messages API, both on their official Go
// SDKs, with tool calls.
//
// Every model call is bounded by Config.Timeout through its context. Transient
// failures (connection errors, 408, 409, 429, 5xx) are retried up to
// Config.MaxRetries times, honouring Retry-After, but only while the next
// attempt still fits in that one Timeout: the SDKs' own retries are off, so a
// call never takes longer than Timeout and a rate limit is reported as the
// provider's "HTTP 429: …", not as a timeout. A provider configured here uses
// exactly its Config: the SDKs' environment defaults (OPENAI_API_KEY,
// ANTHROPIC_BASE_URL, …) are not read.
//
// Failures are *Error values (errors.Is(err, ErrProvider)); a timeout is also
// context.DeadlineExceeded. Their text carries the HTTP status and the
// provider's own message and never the API key, even when a server echoes
// the request back.
package provider

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Provider kinds an agent's `provider:` may name.
const (
	Echo      = "echo"
	OpenAI    = "openai"
	Ollama    = "ollama"
	Anthropic = "anthropic"
)

// Kinds lists every provider kind, for validation messages.
var Kinds = []string{Echo, OpenAI, Ollama, Anthropic}

// DefaultTimeout bounds one model call when Config.Timeout is zero.
const DefaultTimeout = 60 * time.Second

// Config is one entry of the `providers:` section.
type Config struct {
	// BaseURL of the API. Zero: https://api.openai.com/v1 (openai),
	// http://localhost:11434/v1 (ollama), https://api.anthropic.com (anthropic).
	BaseURL string `yaml:"base_url"`
	// APIKey sent with every call. Zero: none (fine for ollama).
	APIKey secret.Secret `yaml:"api_key"`
	// Timeout of one model call, every retry and wait included. Zero: 60s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxRetries of a call that failed transiently (connection error, 408,
	// 409, 429, 5xx), each only while it fits before Timeout. Zero: 2;
	// negative: no retries.
	MaxRetries int `yaml:"max_retries"`
	// MaxTokens caps the length of one answer. Zero: 4096 for anthropic
	// (the Messages API requires a cap), the server's default for openai and
	// ollama.
	MaxTokens int `yaml:"max_tokens"`
	// HTTPClient overrides the client used for calls (tests, proxies). Zero:
	// a client with no overall timeout; Timeout bounds each call instead.
	HTTPClient *http.Client `yaml:"-"`
}

// Configs is the `providers:` section, keyed by kind.
type Configs map[string]Config

// Validate checks the section.
func (c Configs) Validate() error {
	for _, kind := range slices.Sorted(maps.Keys(c)) {
		cfg := c[kind]
		if !Known(kind) {
			return fmt.Errorf("providers: unknown provider %q (known: %v)", kind, Kinds)
		}
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("providers.%s.%w", kind, err)
		}
	}
	return nil
}

// Validate checks one provider's settings. Its errors start with the key at
// fault, so that Configs.Validate can prefix the section.
func (c Config) Validate() error {
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("base_url: want an absolute http(s) URL, got %q", redactURL(c.BaseURL))
		}
	}
	if c.Timeout < 0 {
		return errors.New("timeout: must not be negative")
	}
	if c.MaxTokens < 0 {
		return errors.New("max_tokens: must not be negative")
	}
	return nil
}

// redactURL hides the credentials a URL may carry: its userinfo (a token is
// often the whole of it, https://TOKEN@host) and its query (?api_key=…).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	if u.RawQuery != "" {
		u.RawQuery = "[redacted]"
	}
	u.Fragment = ""
	return u.String()
}

// Known reports whether kind names a provider.
func Known(kind string) bool {
	for _, k := range Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// New returns the model for a provider kind.
func New(kind string, cfg Config) (agent.Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("providers.%s.%w", kind, err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch kind {
	case Echo, "":
		return EchoModel{}, nil
	case OpenAI, Ollama:
		m, err := newOpenAI(kind, cfg)
		if err != nil {
			return nil, err
		}
		return m, nil
	case Anthropic:
		m, err := newAnthropic(cfg)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, fmt.Errorf("unknown provider %q (known: %v)", kind, Kinds)
}

// ErrProvider marks every failure of a model call (check with errors.Is);
// *Error carries the details.
var ErrProvider = errors.New("provider failed")

// Error is a failed model call. It never contains the API key.
type Error struct {
	Provider string // kind
	Status   int    // HTTP status, 0 when the call did not get one
	Message  string // the provider's own message, or what went wrong
	Err      error  // underlying cause (timeouts, network), if any
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s: HTTP %d: %s", e.Provider, e.Status, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Provider, e.Message)
}

func (e *Error) Unwrap() []error { return []error{ErrProvider, e.Err} }
