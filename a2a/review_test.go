package a2a_test

import (
	"context"
	"errors"
	v1client "github.com/a2aproject/a2a-go/v2/a2aclient"
	v1card "github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	axocoatl "github.com/axocoatl/axocoatl-go"
	"net/http"
	"strings"
	"testing"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/axocoatl/axocoatl-go/a2a"
)

// ListTasks' status timestamp filter works with the a2a-go/v2 client on
// both bindings: over HTTP+JSON it sends the filter as lastUpdatedAfter
// (a2a.proto names it statusTimestampAfter; both are read).
func TestV1ListTasksTimestampFilter(t *testing.T) {
	for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			f := newFixture(t, a2a.Config{})
			c, _, _ := f.v1Client(t, f.srv.URL, binding)
			v1Send(t, c, v1Message("one", nil))
			ctx := context.Background()
			all, err := c.ListTasks(ctx, &a2a1.ListTasksRequest{})
			must(t, err)
			if len(all.Tasks) != 1 {
				t.Fatalf("ListTasks without a filter: %d tasks, want 1", len(all.Tasks))
			}
			future := time.Now().Add(time.Hour)
			none, err := c.ListTasks(ctx, &a2a1.ListTasksRequest{StatusTimestampAfter: &future})
			must(t, err)
			if len(none.Tasks) != 0 {
				t.Fatalf("ListTasks updated after %s: %d tasks, want none", future, len(none.Tasks))
			}
		})
	}
}

// versionRewriter sends every request with another A2A-Version, as a
// client of a newer generation would.
type versionRewriter struct {
	version string
	next    http.RoundTripper
}

func (v versionRewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("A2A-Version", v.version)
	return v.next.RoundTrip(r)
}

// An unsupported version on a streaming method is an error the streaming
// client can read: an SSE event with -32009, not a JSON body that an SSE
// reader skips (a2a-go/v2's client then saw an empty stream and no error).
func TestV1UnsupportedVersionOnStream(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	ctx := context.Background()
	hc := &http.Client{Transport: versionRewriter{"9.9", f.client.Transport}, Timeout: f.client.Timeout}
	card, err := v1card.NewResolver(f.client).Resolve(ctx, f.srv.URL)
	must(t, err)
	c, err := v1client.NewFromCard(ctx, card, v1client.WithJSONRPCTransport(hc),
		v1client.WithConfig(v1client.Config{PreferredTransports: []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC}}))
	must(t, err)
	defer c.Destroy()
	var got error
	events := 0
	for _, err := range c.SendStreamingMessage(ctx, v1Message("hi", nil)) {
		if err != nil {
			got = err
			break
		}
		events++
	}
	if got == nil || !errors.Is(got, a2a1.ErrVersionNotSupported) || !strings.Contains(got.Error(), "supported versions: 1.0, 0.3") {
		t.Fatalf("stream with A2A-Version 9.9: %d events, error %v; want VersionNotSupported naming the versions", events, got)
	}
}

// The REST binding's writes refuse a foreign browser Origin like JSON-RPC
// does (a text/plain POST is a simple request: no preflight protects it).
func TestRESTCrossOriginWritesRefused(t *testing.T) {
	f := newFixture(t, a2a.Config{}, axocoatl.HTTPOptions{AllowedOrigins: []string{"https://app.example.com"}})
	for _, path := range []string{"/a2a/message:send", "/a2a/message:stream", "/a2a/agents/assistant/message:send", "/a2a/tasks/x:cancel"} {
		status, out := do(t, f, "POST", path, v1SendBody, "Content-Type", "text/plain", "Origin", "http://evil.example")
		if status != http.StatusForbidden {
			t.Fatalf("%s from a foreign origin: %d %s", path, status, out)
		}
	}
	if status, out := do(t, f, "POST", "/a2a/message:send", v1SendBody, "Content-Type", "text/plain", "Origin", "https://app.example.com"); status != http.StatusOK {
		t.Fatalf("allowed origin: %d %s", status, out)
	}
}
