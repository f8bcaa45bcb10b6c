package config_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/egress"
)

// The push section and the a2a push keys decode, validate with the key in
// the error, and build an Engine whose egress module is its Pusher.
func TestPushKeys(t *testing.T) {
	const file = `
agents: [{id: assistant, provider: echo}]
push:
  enabled: true
  secret: plain-secret
  max_attempts: 3
  backoff_base: 10ms
a2a:
  push_allowed_hosts: [receiver.internal]
  max_push_configs_per_task: 4
  max_push_configs: 40
`
	cfg, err := config.Parse("push.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Push.Enabled || cfg.Push.MaxAttempts != 3 || cfg.Push.BackoffBase != 10*time.Millisecond || cfg.Push.Secret.Reveal() != "plain-secret" ||
		cfg.A2A.MaxPushConfigsPerTask != 4 || cfg.A2A.MaxPushConfigs != 40 || len(cfg.A2A.PushAllowedHosts) != 1 {
		t.Fatalf("decoded %v, a2a %+v", cfg.Push, cfg.A2A)
	}
	if strings.Contains(cfg.Push.String(), "plain-secret") {
		t.Fatal("Push.String shows the secret")
	}
	cfg.Server.DataDir = t.TempDir()
	ctx := context.Background()
	rt, err := cfg.Build(ctx, config.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	if p, ok := rt.Engine.Pusher(); !ok || p != rt.Egress {
		t.Fatalf("Engine.Pusher() = %v, %v: want the egress module", p, ok)
	}
	found := false
	for _, s := range rt.Egress.Status() {
		found = found || s.Name == egress.PushWebhook
	}
	if !found {
		t.Fatal("GET /api/webhooks lists no a2a-push")
	}

	for _, bad := range []struct{ file, key string }{
		{"push: {enabled: true, max_attempts: -1}", "push.max_attempts"},
		{"push: {enabled: true, secret: whsec_!!}", "push.secret"},
		{"a2a: {max_push_configs: -1}", "a2a.max_push_configs"},
		{"push: {enabled: true, bogus: 1}", "push.bogus"},
	} {
		_, err := config.Parse("bad.yaml", []byte(bad.file))
		if err == nil || !strings.Contains(err.Error(), bad.key) {
			t.Errorf("%s: %v, want an error naming %s", bad.file, err, bad.key)
		}
	}
}
