// Package provider is what every model provider shares: [Config] (one
// provider's settings; [Configs] keyed by kind, as the daemon's
// `providers:` section decodes into), API keys ([Config.Key], [CheckKey]),
// the failure type ([*Error], [ErrProvider]) and the offline [EchoModel],
// an [agent.Model] that answers with the last user message (and streams it
// word by word, an [agent.Streamer]). It imports no
// provider's client: each provider is its own package, so a host pays, in
// build time and binary size, only for the providers it imports:
//
//   - [github.com/axocoatl/axocoatl-go/agent/provider/openai]: Chat
//     Completions, for OpenAI and any compatible server (Ollama, vLLM, LM
//     Studio, llama.cpp, OpenRouter, …);
//   - [github.com/axocoatl/axocoatl-go/agent/provider/anthropic]: the
//     Anthropic Messages API;
//   - [github.com/axocoatl/axocoatl-go/agent/provider/builtin]: every
//     provider above by its kind name ([Echo], [OpenAI], [Ollama],
//     [Anthropic]), for hosts that read the kind from a config file.
//
// Each provider speaks its API with net/http and encoding/json (no SDK).
// Every model call is bounded by [Config.Timeout] through its context.
// Transient failures (connection errors, 408, 409, 429, 5xx) are retried up
// to [Config.MaxRetries] times, honouring Retry-After, but only while the
// next attempt still fits in that one Timeout, so a call never takes longer
// than Timeout and a rate limit is reported as the provider's "HTTP 429: …",
// not as a timeout.
//
// Keys: with no [Config.APIKey], openai reads OPENAI_API_KEY and anthropic
// reads ANTHROPIC_API_KEY ([EnvKey]), once, when the model is built, as
// their official SDKs do. Nothing else comes from the environment (no
// *_BASE_URL): a provider sends its requests exactly where its Config says
// ([DefaultBaseURL] when it says nothing). A host checks before serving
// that each provider its agents use has the key it needs with [CheckKey].
//
// Failures are [*Error] values (errors.Is(err, ErrProvider)); a timeout is
// also [context.DeadlineExceeded]. Their text carries the HTTP status and
// the provider's own message and never the API key, even when a server
// echoes the request back.
package provider

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/internal/redact"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Provider kinds an agent's `provider:` may name.
const (
	Echo      = "echo"
	OpenAI    = "openai"
	Ollama    = "ollama"
	Anthropic = "anthropic"
)

// Kinds lists every provider kind, for validation messages ([Known]).
var Kinds = []string{Echo, OpenAI, Ollama, Anthropic}

// Defaults of [Config]'s zero fields ([DefaultBaseURL] picks the kind's URL).
const (
	// DefaultTimeout bounds one model call when Config.Timeout is zero.
	DefaultTimeout = 60 * time.Second
	// DefaultMaxRetries is the number of retries when Config.MaxRetries is zero.
	DefaultMaxRetries = 2

	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultOllamaBaseURL    = "http://localhost:11434/v1"
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
)

// Config is one provider's settings: in the daemon's file, one entry of
// the `providers:` section. The zero value means every default below. A
// provider package's New takes it and reads the key once ([Config.Key]).
type Config struct {
	// BaseURL of the API. Zero: https://api.openai.com/v1 (openai),
	// http://localhost:11434/v1 (ollama), https://api.anthropic.com (anthropic).
	BaseURL string `yaml:"base_url"`
	// APIKey sent with every call. Zero: the kind's conventional variable
	// (OPENAI_API_KEY for openai, ANTHROPIC_API_KEY for anthropic; see
	// [EnvKey]), read once when the model is built; ollama reads none and
	// sends no key.
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
	// LookupEnv is where a Config with no APIKey looks up the kind's
	// variable (a host that reads its environment through its own lookup,
	// as the daemon's config does, passes it here). Zero: os.LookupEnv.
	LookupEnv func(string) (string, bool) `yaml:"-"`
}

// Configs is the `providers:` section: a [Config] per kind ([Kinds]).
type Configs map[string]Config

// Validate checks the section.
func (c Configs) Validate() error {
	for _, kind := range slices.Sorted(maps.Keys(c)) {
		cfg := c[kind]
		if !Known(kind) {
			return cfgerr.Errorf("providers", "unknown provider %q (known: %v)", kind, Kinds)
		}
		if err := cfg.Validate(); err != nil {
			return cfgerr.At("providers."+kind, err)
		}
	}
	return nil
}

// Validate checks one provider's settings. Its errors are
// *axocoatl.ConfigError (internal/cfgerr) naming the key at fault, so that
// [Configs.Validate] and a config loader can put them under the section.
func (c Config) Validate() error {
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cfgerr.Errorf("base_url", "want an absolute http(s) URL, got %q", RedactURL(c.BaseURL))
		}
	}
	if c.Timeout < 0 {
		return cfgerr.Errorf("timeout", "must not be negative")
	}
	if c.MaxTokens < 0 {
		return cfgerr.Errorf("max_tokens", "must not be negative")
	}
	return nil
}

// RedactURL hides the credentials a URL may carry: its userinfo (a token is
// often the whole of it, https://TOKEN@host) and its query (?api_key=…).
// Providers quote base URLs in errors with it.
func RedactURL(raw string) string { return redact.URL(raw) }

// Known reports whether kind names a provider.
func Known(kind string) bool {
	for _, k := range Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// ErrProvider marks every failure of a model call (check with errors.Is);
// [*Error] carries the details.
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
