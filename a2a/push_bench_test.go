package a2a_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/axocoatl/axocoatl-go/a2a"
)

// BenchmarkPushTask is one task with a push config through to the
// receiver: a blocking SendMessage (a2a-go/v2, JSON-RPC) carrying the
// config, then every notification (the submitted status, the artifact,
// the final status and task) POSTed through egress's queue, signed, to an
// httptest receiver on loopback. ns/op is the whole round; the receiver
// answers at once. The "no-push" case is the same SendMessage without a
// config, the baseline.
func BenchmarkPushTask(b *testing.B) {
	got := make(chan struct{}, 1024)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- struct{}{}
	}))
	defer recv.Close()
	f := newPushFixture(b, a2a.Config{PushAllowedHosts: []string{"127.0.0.1"}, MaxTasks: 100000, MaxPushConfigs: 1 << 20}, fastPush)
	close(f.release)
	c, _, _ := f.v1Client(b, f.srv.URL, a2a1.TransportProtocolJSONRPC)
	ctx := context.Background()
	for _, push := range []bool{false, true} {
		name := "no-push"
		if push {
			name = "push"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := v1Message("ping", map[string]any{a2a.ReceiverKey: "upper"})
				if push {
					req.Config = &a2a1.SendMessageConfig{PushConfig: &a2a1.PushConfig{URL: recv.URL, Token: pushToken,
						Auth: &a2a1.PushAuthInfo{Scheme: "Bearer", Credentials: pushCred}}}
				}
				if _, err := c.SendMessage(ctx, req); err != nil {
					b.Fatal(err)
				}
				if push {
					for range 4 {
						<-got
					}
				}
			}
		})
	}
}
