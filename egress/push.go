package egress

import (
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"maps"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/internal/httpheader"
	"github.com/axocoatl/axocoatl-go/internal/netguard"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/secret"
)

// PushWebhook is the name push deliveries go under in the API, metrics
// and logs (GET /api/webhooks/a2a-push/deliveries is their delivery log).
const PushWebhook = "a2a-push"

// Push configures push delivery ([Config].Push): deliveries to URLs that
// clients choose at run time ([axocoatl.PushRequest], A2A push
// notifications), through the same durable queue, retries, dead letters
// and delivery log as the webhooks, under the name [PushWebhook]. Zero:
// disabled (the module is then no [axocoatl.Pusher]).
type Push struct {
	// Enabled turns push delivery on. Zero: off.
	Enabled bool `yaml:"enabled"`
	// Secret signs every push request as [Webhook].Secret signs a
	// webhook's (X-Axocoatl-Signature and the Standard Webhooks headers;
	// receivers check them with [Verify]). Zero: push requests are not
	// signed.
	Secret secret.Secret `yaml:"secret"`
	// Timeout, MaxAttempts, BackoffBase, BackoffMax, QueueSize,
	// Concurrency and MaxDeadLetters are as in [Webhook], with the same
	// defaults.
	Timeout        time.Duration `yaml:"timeout"`
	MaxAttempts    int           `yaml:"max_attempts"`
	BackoffBase    time.Duration `yaml:"backoff_base"`
	BackoffMax     time.Duration `yaml:"backoff_max"`
	QueueSize      int           `yaml:"queue_size"`
	Concurrency    int           `yaml:"concurrency"`
	MaxDeadLetters int           `yaml:"max_dead_letters"`
}

// webhook is the push hook's configuration: a webhook with no URL of its
// own (each delivery carries one) and no events.
func (p Push) webhook() Webhook {
	return Webhook{Name: PushWebhook, Secret: p.Secret, Timeout: p.Timeout, MaxAttempts: p.MaxAttempts,
		BackoffBase: p.BackoffBase, BackoffMax: p.BackoffMax, QueueSize: p.QueueSize, Concurrency: p.Concurrency,
		MaxDeadLetters: p.MaxDeadLetters}
}

// Validate checks the push section; errors name its keys.
func (p Push) Validate() error {
	w := p.webhook()
	w.URL = "https://push.invalid/" // each delivery brings its own
	return w.Validate()
}

// String never shows the secret.
func (p Push) String() string {
	return fmt.Sprintf("push enabled=%v signed=%v", p.Enabled, !p.Secret.IsZero())
}

// GoString is [Push.String].
func (p Push) GoString() string { return p.String() }

// ErrPushRefused: a push request the module does not take (a bad URL, a
// header it sets itself); errors.Is finds it with the reason.
var ErrPushRefused = errors.New("egress: push request refused")

// Pushes implements [axocoatl.Pusher]: push delivery is enabled and the
// module running.
func (m *Module) Pushes() bool {
	if m.push == nil {
		return false
	}
	m.life.RLock()
	defer m.life.RUnlock()
	return m.state.Running()
}

// Push implements [axocoatl.Pusher]: p is queued (stored first with a data
// dir) as one delivery of [PushWebhook] and sent with the webhooks'
// retries. Without p.AllowPrivate the request may reach only public
// addresses, checked on the address dialed. The header values are kept
// with the delivery (in the store with a data dir) and never shown.
func (m *Module) Push(ctx context.Context, p axocoatl.PushRequest) (string, error) {
	h := m.push
	if h == nil {
		return "", fmt.Errorf("%w: egress push is not enabled", axocoatl.ErrPushUnavailable)
	}
	u, err := url.Parse(p.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%w: the URL must be an absolute http or https URL", ErrPushRefused)
	}
	hdr := make(map[string]string, len(p.Header))
	for k, v := range p.Header {
		if containsFold(reserved, k) {
			return "", fmt.Errorf("%w: header %q is set by egress itself", ErrPushRefused, k)
		}
		if pr := httpheader.Problem(k, v.Reveal()); pr != "" {
			return "", fmt.Errorf("%w: %s", ErrPushRefused, pr)
		}
		hdr[http.CanonicalHeaderKey(k)] = v.Reveal()
	}
	if len(p.Body) == 0 {
		return "", fmt.Errorf("%w: empty body", ErrPushRefused)
	}
	m.life.RLock()
	defer m.life.RUnlock()
	if !m.state.Running() || m.pushBackend == nil {
		return "", fmt.Errorf("%w: egress is not running", axocoatl.ErrPushUnavailable)
	}
	now := time.Now()
	d := &delivery{id: lattice.NewID(now), eventID: p.Subject, eventType: p.EventType, body: p.Body, created: now,
		status: StatusQueued, url: p.URL, header: hdr, allowPrivate: p.AllowPrivate}
	if m.tracing.prop != nil && trace.SpanContextFromContext(ctx).IsValid() {
		// The trace of the push (an A2A task's run) goes on with it.
		m.tracing.prop.Inject(ctx, traceCarrier{d})
	}
	d.key = m.nextKey()
	if m.pushBackend.put(h, []*delivery{d}) > 0 {
		return "", fmt.Errorf("%w: %d push deliveries waiting (egress push queue_size)", ErrQueueFull, h.cfg.QueueSize)
	}
	return d.id, nil
}

func containsFold(list []string, k string) bool {
	k = http.CanonicalHeaderKey(k)
	for _, s := range list {
		if s == k {
			return true
		}
	}
	return false
}

// pushClients gives the push hook its two clients: guarded (every dial
// checked by [netguard.Control]) and open (for AllowPrivate deliveries).
// Neither uses a proxy: the guard must see the address of the receiver.
func (h *hook) pushClients() (guarded, open *retryablehttp.Client) {
	mk := func(control bool) *retryablehttp.Client {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		if control {
			d.Control = netguard.Control
		}
		// A fresh transport, not a clone: a cloned DialTLSContext would
		// bypass the guard.
		t := &http.Transport{
			DialContext: d.DialContext, ForceAttemptHTTP2: true, MaxIdleConns: 100,
			MaxIdleConnsPerHost: h.cfg.Concurrency, IdleConnTimeout: 90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second, ExpectContinueTimeout: time.Second,
		}
		return h.newClient(t)
	}
	return mk(true), mk(false)
}

// newPushHook builds the push hook of cfg.Push.
func newPushHook(m *Module, p Push) *hook {
	h := newHook(m, p.webhook().withDefaults())
	h.isPush = true
	return h
}

// clientFor is the client that sends d.
func (h *hook) clientFor(d *delivery) *retryablehttp.Client {
	if d.allowPrivate && h.open != nil {
		return h.open
	}
	return h.client
}

// urlOf is where d goes: its own URL (a push delivery) or the webhook's.
func (h *hook) urlOf(d *delivery) string {
	if d.url != "" {
		return d.url
	}
	return h.cfg.URL
}

// validatePush is Config.Validate's part for Push.
func (c Config) validatePush() error {
	if !c.Push.Enabled {
		return nil
	}
	return cfgerr.At("push", c.Push.Validate())
}

func cloneHeader(h map[string]string) map[string]string { return maps.Clone(h) }
