package egress

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/internal/httpheader"
	"github.com/axocoatl/axocoatl-go/internal/redact"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Defaults applied where a [Webhook] field is zero.
const (
	DefaultTimeout        = 10 * time.Second
	DefaultMaxAttempts    = 8
	DefaultBackoffBase    = 500 * time.Millisecond
	DefaultBackoffMax     = time.Minute
	DefaultQueueSize      = 10000
	DefaultConcurrency    = 32
	DefaultMaxDeadLetters = 1000
	// DefaultTolerance is how far a webhook-timestamp may be from the
	// receiver's clock in [Verify] when the caller passes 0.
	DefaultTolerance = 5 * time.Minute
)

// ErrInvalidConfig is [axocoatl.ErrInvalidConfig], kept under this name
// for the callers that check [errors.Is](err, egress.ErrInvalidConfig).
var ErrInvalidConfig = axocoatl.ErrInvalidConfig

// Config configures the [Module] made by [New]. The zero value has no
// webhooks: the module then starts nothing and sends nothing.
type Config struct {
	// Webhooks are the `webhooks:` entries of the config file.
	Webhooks []Webhook `yaml:"webhooks"`
	// DataDir is where deliveries are kept across restarts and crashes
	// (file [DBFile], a bbolt database). Set by the host, not read from the
	// `webhooks:` list (the daemon passes its data dir, ./data by default).
	// Zero: deliveries live in memory only and a restart loses those not
	// yet delivered.
	DataDir string `yaml:"-"`
	// Transport sends the requests (a proxy, a custom dialer, tests).
	// Zero: a transport like [http.DefaultTransport] that keeps as many idle
	// connections per host as the webhook's concurrency.
	Transport http.RoundTripper `yaml:"-"`
	// JetStream, when set, keeps deliveries in NATS JetStream, shared with
	// every process on the same NATS lattice ([JetStream]); DataDir is then
	// not used. Set by the host (the daemon sets it when lattice.backend is
	// nats). Zero: the bbolt file of DataDir, or memory.
	JetStream *JetStream `yaml:"-"`
	// Push enables push delivery ([Push], [Module.Push]): the file's
	// `push:` section, set by the host. Zero: disabled.
	Push Push `yaml:"-"`
}

// Webhook is one entry of `webhooks:` ([Config].Webhooks).
type Webhook struct {
	// Name identifies the webhook in the API, metrics and logs:
	// [a-z0-9_-]+, at most 64 characters, unique. Required.
	Name string `yaml:"name"`
	// URL is where events are POSTed: an absolute http or https URL.
	// Required. Only its host is ever shown (logs, doctor, the API show the
	// URL without query string or credentials).
	URL string `yaml:"url"`
	// Events selects what is sent: event types or [path.Match] globs
	// ("Task*"). Zero: every coordination event (TaskCompleted,
	// AgentFailed, approvals, custom events). Telemetry events
	// (AgentActivated, ToolCalled, ToolResult, ModelResult, McpServer*) are sent only
	// when a pattern names them: exactly, or by a glob that is not the bare
	// "*" ("Tool*").
	Events []string `yaml:"events"`
	// Secret signs every request (X-Axocoatl-Signature and the Standard
	// Webhooks headers). A secret starting with "whsec_" is the base64 of
	// the key (the Standard Webhooks form); any other is the key's bytes.
	// Zero: requests are not signed. Written in the file but empty (a
	// variable that expands to nothing) is a configuration error.
	Secret secret.Secret `yaml:"secret"`
	// Headers are added to every request (Authorization, …). Values are
	// secrets. The headers egress sets itself may not be overridden.
	// Zero: none.
	Headers map[string]secret.Secret `yaml:"headers"`
	// Timeout bounds one attempt, from connecting to the end of the
	// response. Zero: 10s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxAttempts is how many times one delivery is tried before it is
	// dead-lettered. Zero: 8.
	MaxAttempts int `yaml:"max_attempts"`
	// BackoffBase is the first retry's bound: retry n waits a random time
	// in [0, min(BackoffMax, BackoffBase·2ⁿ⁻¹)] ("full jitter"). Zero: 500ms.
	BackoffBase time.Duration `yaml:"backoff_base"`
	// BackoffMax caps every wait between attempts, a Retry-After included.
	// Zero: 1m.
	BackoffMax time.Duration `yaml:"backoff_max"`
	// QueueSize bounds the deliveries waiting to be sent. Events that
	// arrive while it is full are dropped and counted. Zero: 10000.
	QueueSize int `yaml:"queue_size"`
	// Concurrency bounds the deliveries in flight at once. Zero: 32.
	Concurrency int `yaml:"concurrency"`
	// MaxDeadLetters bounds the failed and dead-lettered deliveries kept
	// for inspection and retry; beyond it the oldest is discarded (and
	// counted). Zero: 1000.
	MaxDeadLetters int `yaml:"max_dead_letters"`

	// secretSet records that the file had a `secret:` key, so that one
	// that expanded to empty is refused instead of silently not signing.
	secretSet bool
}

// yamlKeys are the keys of a webhook entry, in the order of the docs.
var yamlKeys = []string{"name", "url", "events", "secret", "headers", "timeout", "max_attempts",
	"backoff_base", "backoff_max", "queue_size", "concurrency", "max_dead_letters"}

// UnmarshalYAML decodes one `webhooks:` entry, refusing unknown keys and
// remembering whether `secret:` was written (an empty value decodes to the
// same zero as no key at all).
func (w *Webhook) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		var errs []*yaml.LoadError
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			switch {
			case k.Value == "secret":
				w.secretSet = true
			case !slices.Contains(yamlKeys, k.Value):
				errs = append(errs, &yaml.LoadError{
					Mark:    yaml.Mark{Line: k.Line, Column: k.Column},
					Message: fmt.Sprintf("unknown key %q (known: %s)", k.Value, strings.Join(yamlKeys, ", ")),
				})
			}
		}
		if len(errs) > 0 {
			return &yaml.LoadErrors{Errors: errs}
		}
	}
	type plain Webhook // without this method
	set := w.secretSet
	if err := n.Decode((*plain)(w)); err != nil {
		return err
	}
	w.secretSet = set
	return nil
}

// reserved are the headers egress sets itself; Headers may not name them.
var reserved = []string{"Content-Type", "Content-Length", "Host", "User-Agent", "X-Axocoatl-Event",
	"X-Axocoatl-Delivery", "X-Axocoatl-Timestamp", "X-Axocoatl-Signature", "Webhook-Id",
	"Webhook-Timestamp", "Webhook-Signature"}

// Validate checks one entry. Each error is an [*axocoatl.ConfigError]
// naming the key, never a secret value nor the URL's query.
func (w Webhook) Validate() error {
	bad := cfgerr.Errorf
	if w.Name == "" {
		return bad("", "name is required")
	}
	if !agent.ValidID(w.Name) {
		return bad("name", "%q must match [a-z0-9_-]+ (at most 64 characters)", w.Name)
	}
	if w.URL == "" {
		return bad("", "url is required")
	}
	u, err := url.Parse(w.URL)
	if err != nil {
		return bad("url", "cannot parse %q", displayURL(w.URL))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("url", "%q must be an absolute http or https URL", displayURL(w.URL))
	}
	for _, p := range w.Events {
		if p == "" {
			return bad("events", "an empty event name")
		}
		if _, err := path.Match(p, ""); err != nil {
			return bad("events", "bad pattern %q: %v", p, err)
		}
	}
	if w.secretSet && w.Secret.IsZero() {
		return bad("secret", "is set but empty (does its variable expand to nothing?); remove the key to send unsigned requests")
	}
	if _, err := signingKey(w.Secret.Reveal()); err != nil {
		return bad("secret", "%v", err)
	}
	for k, v := range w.Headers {
		// A reserved name is a valid one: checked first, the invalid-name
		// message still comes first for a name that is not a field name.
		if slices.Contains(reserved, http.CanonicalHeaderKey(k)) {
			return bad("headers", "%q is set by egress itself", k)
		}
		if p := httpheader.Problem(k, v.Reveal()); p != "" {
			return bad("headers", "%s", p)
		}
	}
	return cfgerr.NotNegative(cfgerr.N("timeout", w.Timeout), cfgerr.N("max_attempts", w.MaxAttempts),
		cfgerr.N("backoff_base", w.BackoffBase), cfgerr.N("backoff_max", w.BackoffMax), cfgerr.N("queue_size", w.QueueSize),
		cfgerr.N("concurrency", w.Concurrency), cfgerr.N("max_dead_letters", w.MaxDeadLetters))
}

// Validate checks every webhook and that names are unique. Each error is
// an [*axocoatl.ConfigError] keyed "webhooks[i].<key>".
func (c Config) Validate() error {
	if err := cfgerr.Entries("webhooks", c.Webhooks); err != nil {
		return err
	}
	if err := ValidateNames(c.Webhooks); err != nil {
		return cfgerr.At("webhooks", err)
	}
	if err := c.validatePush(); err != nil {
		return err
	}
	if c.Push.Enabled && slices.ContainsFunc(c.Webhooks, func(w Webhook) bool { return w.Name == PushWebhook }) {
		return cfgerr.Errorf("webhooks", "the name %q is push delivery's (push.enabled)", PushWebhook)
	}
	if c.JetStream != nil {
		return cfgerr.At("jetstream", c.JetStream.Validate())
	}
	return nil
}

// ValidateNames reports a webhook name used twice (part of
// [Config.Validate]).
func ValidateNames(hooks []Webhook) error {
	return cfgerr.UniqueNames(hooks, func(w Webhook) string { return w.Name })
}

// withDefaults fills the zero fields.
func (w Webhook) withDefaults() Webhook {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&w.MaxAttempts, DefaultMaxAttempts)
	def(&w.QueueSize, DefaultQueueSize)
	def(&w.Concurrency, DefaultConcurrency)
	def(&w.MaxDeadLetters, DefaultMaxDeadLetters)
	if w.Timeout == 0 {
		w.Timeout = DefaultTimeout
	}
	if w.BackoffBase == 0 {
		w.BackoffBase = DefaultBackoffBase
	}
	if w.BackoffMax == 0 {
		w.BackoffMax = DefaultBackoffMax
	}
	if w.BackoffMax < w.BackoffBase {
		w.BackoffMax = w.BackoffBase
	}
	return w
}

// Host is the exact host (and port, when the URL has one) the webhook
// sends to: what `doctor` and the startup log print.
func (w Webhook) Host() string {
	u, err := url.Parse(w.URL)
	if err != nil {
		return ""
	}
	return u.Host
}

// Target is the URL as it may be shown: scheme, host and path, without
// credentials or query string.
func (w Webhook) Target() string { return displayURL(w.URL) }

// String describes the webhook by name, shown URL and filter: never the
// secret, a header value or the URL's query, so that printing a Config
// (%v, %+v) cannot leak them.
func (w Webhook) String() string {
	return fmt.Sprintf("webhook %s → %s (%s)", w.Name, w.Target(), w.FilterText())
}

// GoString is [Webhook.String], for %#v.
func (w Webhook) GoString() string { return w.String() }

// LogValue implements [slog.LogValuer] with the same safe fields.
func (w Webhook) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", w.Name), slog.String("host", w.Host()), slog.String("filter", w.FilterText()))
}

// MarshalJSON writes the webhook's description ([WebhookInfo]), like
// [secret.Secret] never its secret, header values or URL query.
func (w Webhook) MarshalJSON() ([]byte, error) { return json.Marshal(w.info()) }

// LogValue implements [slog.LogValuer]: the webhooks' descriptions.
func (c Config) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(c.Webhooks)+1)
	for _, w := range c.Webhooks {
		attrs = append(attrs, slog.Any(w.Name, w))
	}
	attrs = append(attrs, slog.String("data_dir", c.DataDir))
	return slog.GroupValue(attrs...)
}

// FilterText says in words which events the webhook receives.
func (w Webhook) FilterText() string {
	if len(w.Events) == 0 {
		return "all coordination events"
	}
	return strings.Join(w.Events, ", ")
}

// WebhookInfo describes a webhook for logs and `doctor`: never a secret or
// a header value.
type WebhookInfo struct {
	Name   string `json:"name"`
	Host   string `json:"host"`   // exact host[:port]
	URL    string `json:"url"`    // scheme://host/path, no query or credentials
	Filter string `json:"filter"` // "all coordination events" or the patterns
	// Events are the configured patterns (empty: all coordination events).
	Events []string `json:"events"`
	Signed bool     `json:"signed"`
	// Headers are the names of the static headers, sorted; values are
	// never shown.
	Headers []string `json:"headers,omitempty"`
}

// Describe lists each webhook's name, host and filter, in config order:
// what the startup log and `doctor` print. It needs no started module.
func (c Config) Describe() []WebhookInfo {
	out := make([]WebhookInfo, 0, len(c.Webhooks))
	for _, w := range c.Webhooks {
		out = append(out, w.info())
	}
	return out
}

func (w Webhook) info() WebhookInfo {
	names := make([]string, 0, len(w.Headers))
	for k := range w.Headers {
		names = append(names, http.CanonicalHeaderKey(k))
	}
	slices.Sort(names)
	return WebhookInfo{Name: w.Name, Host: w.Host(), URL: w.Target(), Filter: w.FilterText(),
		Events: slices.Clone(w.Events), Signed: !w.Secret.IsZero(), Headers: names}
}

// displayURL is how a webhook's URL is shown: the one redaction every
// package uses (userinfo, query and key-like path segments hidden).
func displayURL(raw string) string { return redact.URL(raw) }
