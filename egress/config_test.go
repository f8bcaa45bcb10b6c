package egress

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/secret"
)

// The contract's webhooks example decodes straight into Config.
func TestConfigYAML(t *testing.T) {
	src := `
webhooks:
  - name: deploy-alerts
    url: https://hooks.example.com/axocoatl?token=q-value
    events: [TaskCompleted, AgentFailed]
    secret: whsec-not-prefixed-value
    headers: { Authorization: internal-token-value }
    timeout: 10s
  - name: all
    url: http://127.0.0.1:9000/in
    max_attempts: 3
    queue_size: 50
    concurrency: 4
    backoff_base: 1s
    backoff_max: 10s
    max_dead_letters: 7
`
	var c Config
	if err := yaml.Unmarshal([]byte(src), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	a, b := c.Webhooks[0], c.Webhooks[1]
	if a.Secret.Reveal() != "whsec-not-prefixed-value" || a.Headers["Authorization"].Reveal() != "internal-token-value" ||
		a.Timeout != 10*time.Second || len(a.Events) != 2 {
		t.Fatalf("first: %+v", a)
	}
	if b.MaxAttempts != 3 || b.QueueSize != 50 || b.Concurrency != 4 || b.BackoffBase != time.Second || b.BackoffMax != 10*time.Second || b.MaxDeadLetters != 7 {
		t.Fatalf("second: %+v", b)
	}
	d := Webhook{}.withDefaults()
	if d.MaxAttempts != 8 || d.QueueSize != 10000 || d.Concurrency != 32 || d.Timeout != 10*time.Second ||
		d.BackoffBase != 500*time.Millisecond || d.BackoffMax != time.Minute || d.MaxDeadLetters != 1000 {
		t.Fatalf("defaults: %+v", d)
	}
	info := c.Describe()
	if info[0].Host != "hooks.example.com" || info[0].Filter != "TaskCompleted, AgentFailed" || !info[0].Signed ||
		info[0].URL != "https://hooks.example.com/axocoatl?[redacted]" || info[0].Headers[0] != "Authorization" {
		t.Fatalf("describe: %+v", info[0])
	}
	if info[1].Host != "127.0.0.1:9000" || info[1].Filter != "all coordination events" || info[1].Signed {
		t.Fatalf("describe: %+v", info[1])
	}
}

// A `secret:` written in the file but empty (as a variable that expands to
// nothing leaves it) must not silently turn signing off.
func TestConfigEmptySecretRefused(t *testing.T) {
	for _, src := range []string{
		"webhooks: [{name: a, url: 'http://x', secret: ''}]",
		"webhooks: [{name: a, url: 'http://x', secret: }]",
		"webhooks:\n  - name: a\n    url: http://x\n    secret:\n",
	} {
		var c Config
		if err := yaml.Unmarshal([]byte(src), &c); err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "webhooks[0].secret: is set but empty") {
			t.Errorf("%q: Validate = %v", src, err)
		}
	}
	var c Config
	if err := yaml.Unmarshal([]byte("webhooks: [{name: a, url: 'http://x'}]"), &c); err != nil || c.Validate() != nil {
		t.Fatalf("no secret key: %v %v", err, c.Validate())
	}
	if err := yaml.Unmarshal([]byte("webhooks: [{name: a, url: 'http://x', secrte: y}]"), &c); err == nil ||
		!strings.Contains(err.Error(), `unknown key "secrte"`) {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Webhook{Name: "a", URL: "https://h.example/x"}
	cases := map[string]Webhook{
		"name is required":        {URL: "http://x"},
		"must match":              {Name: "A b", URL: "http://x"},
		"url is required":         {Name: "a"},
		"absolute http or https":  {Name: "a", URL: "ftp://x/?token=qq-secret"},
		"bad pattern":             {Name: "a", URL: "http://x", Events: []string{"["}},
		"is set by egress itself": {Name: "a", URL: "http://x", Headers: map[string]secret.Secret{"webhook-signature": "v"}},
		"invalid header name":     {Name: "a", URL: "http://x", Headers: map[string]secret.Secret{"a b": "v"}},
		"control character":       {Name: "a", URL: "http://x", Headers: map[string]secret.Secret{"X-K": "hv-secret\r\nX: y"}},
		"timeout":                 {Name: "a", URL: "http://x", Timeout: -1},
		"queue_size":              {Name: "a", URL: "http://x", QueueSize: -1},
		"whsec_":                  {Name: "a", URL: "http://x", Secret: "whsec_!!!"},
	}
	for want, w := range cases {
		err := Config{Webhooks: []Webhook{ok, w}}.Validate()
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: got %v", want, err)
			continue
		}
		for _, leak := range []string{"qq-secret", "hv-secret"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("error leaks %q: %v", leak, err)
			}
		}
	}
	if err := (Config{Webhooks: []Webhook{ok, ok}}).Validate(); err == nil || !strings.Contains(err.Error(), "duplicate name") {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := New(Config{Webhooks: []Webhook{{Name: "a"}}}); err == nil {
		t.Error("New accepted an invalid config")
	}
}

func TestFilter(t *testing.T) {
	cases := []struct {
		events []string
		typ    string
		want   bool
	}{
		{nil, "TaskCompleted", true},
		{nil, "AgentFailed", true},
		{nil, "ApprovalRequested", true},
		{nil, "Deployed", true}, // custom events are coordination
		{nil, "AgentActivated", false},
		{nil, "ToolCalled", false},
		{[]string{"*"}, "Deployed", true},
		{[]string{"*"}, "ToolCalled", false}, // the bare * is not naming telemetry
		{[]string{"Tool*"}, "ToolCalled", true},
		{[]string{"Tool*"}, "ToolResult", true},
		{[]string{"AgentActivated"}, "AgentActivated", true},
		{[]string{"Task*"}, "TaskCompleted", true},
		{[]string{"Task*"}, "AgentFailed", false},
		{[]string{"TaskCompleted", "AgentFailed"}, "AgentFailed", true},
		{[]string{"TaskCompleted", "AgentFailed"}, "Deployed", false},
	}
	e := axocoatl.New(axocoatl.Options{}) // the classes of the Engine's events
	defer e.Close(context.Background())
	for _, c := range cases {
		ev := lattice.Event{Type: c.typ, Class: e.ClassOf(c.typ)}
		if got := (Webhook{Events: c.events}).matches(ev); got != c.want {
			t.Errorf("events %v, %s: %v, want %v", c.events, c.typ, got, c.want)
		}
	}
}
