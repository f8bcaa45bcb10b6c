package builtin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
)

// Guards: bound providers.<kind>.max_retries (docs/bounds.md, providers).
// A server that fails every call with a transient 503 (asking for a 1 ms
// wait, so each retry fits in the timeout) gets the call once plus
// max_retries more times: 3 in all by default (2 retries), 2 with
// max_retries 1; then the last failure is returned. With the bound gone,
// the calls would go on until the timeout.
func TestProviderRetriesBounded(t *testing.T) {
	for _, wi := range wires {
		for _, tc := range []struct {
			retries, attempts int
		}{{0, 1 + provider.DefaultMaxRetries}, {1, 2}} {
			t.Run(fmt.Sprintf("%s/max_retries=%d", wi.kind, tc.retries), func(t *testing.T) {
				var hits atomic.Int32
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					hits.Add(1)
					w.Header().Set("Retry-After-Ms", "1")
					writeJSON(w, 503, wi.serverErr)
				}))
				defer srv.Close()
				h := newHarness(t, wi.kind, provider.Config{BaseURL: wi.base(srv.URL), MaxRetries: tc.retries, Timeout: time.Minute}, agent.Spec{})
				_, err := h.engine.Execute(context.Background(), "a", "hello")
				if err == nil || !strings.Contains(err.Error(), "HTTP 503: "+wi.errMsg) {
					t.Fatalf("error %v, want the last 503", err)
				}
				if n := hits.Load(); int(n) != tc.attempts {
					t.Fatalf("%d attempts, want %d (max_retries %d)", n, tc.attempts, tc.retries)
				}
			})
		}
	}
}
