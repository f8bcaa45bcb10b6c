package a2a_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	v1client "github.com/a2aproject/a2a-go/v2/a2aclient"
	v1card "github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/axocoatl/axocoatl-go/a2a"
)

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
