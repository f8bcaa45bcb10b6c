package a2aremote

// A2A 0.3 transports: JSON-RPC and HTTP+JSON, as a2a-go/v2's
// a2acompat/a2av0 speaks them (its client half, ported: the package itself
// would bring the 0.3 SDK's servers, gRPC and protobuf into every binary
// that uses this module; bench/README.md, Build). The 0.3 JSON-RPC wire
// types are the 0.3 SDK's a2a package, the 0.3 HTTP+JSON ones a2a-go/v2's
// a2apb/v0/pbjson (plain structs, the ones a2av0 uses); neither pulls gRPC.
// The conversions to the 1.0 types are a2av0's, in internal/a2awire.

import (
	"context"
	"fmt"
	"iter"
	"mime"
	"net/http"
	"net/url"
	"strings"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/axocoatl/axocoatl-go/internal/a2awire"
)

// withTransports03 registers the 0.3 JSON-RPC and HTTP+JSON transports
// over hc with a2aclient's factory.
func withTransports03(hc *http.Client) []a2aclient.FactoryOption {
	var opts []a2aclient.FactoryOption
	for _, b := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		opts = append(opts, a2aclient.WithCompatTransport(a2awire.Version03, b, a2aclient.TransportFactoryFn(
			func(_ context.Context, _ *a2a1.AgentCard, iface *a2a1.AgentInterface) (a2aclient.Transport, error) {
				return newTransport03(b, iface.URL, hc)
			})))
	}
	return opts
}

// newTransport03 is the 0.3 transport of binding at u over hc. An SSE
// line may be as long as hc's response bound (max_response_bytes).
func newTransport03(binding a2a1.TransportProtocol, u string, hc *http.Client) (a2aclient.Transport, error) {
	limit := int64(DefaultMaxResponseBytes)
	if rt, ok := hc.Transport.(*roundTripper); ok {
		limit = rt.limit
	}
	if binding == a2a1.TransportProtocolJSONRPC {
		return &jsonrpc03{url: u, hc: hc, lineLimit: limit}, nil
	}
	base, err := url.Parse(u)
	if err != nil {
		return nil, fmt.Errorf("0.3 HTTP+JSON interface URL: %w", err)
	}
	return &rest03{base: base, hc: hc, lineLimit: limit}, nil
}

// unsupported03 is the part of a2aclient.Transport this module never
// calls on a 0.3 remote (push configs, resubscription, the extended
// card): each answers a2a1.ErrUnsupportedOperation.
type unsupported03 struct{}

func (unsupported03) ListTasks(context.Context, a2aclient.ServiceParams, *a2a1.ListTasksRequest) (*a2a1.ListTasksResponse, error) {
	return nil, a2a1.ErrUnsupportedOperation // 0.3 has no tasks/list (a2av0 answers the same)
}

func (unsupported03) SubscribeToTask(context.Context, a2aclient.ServiceParams, *a2a1.SubscribeToTaskRequest) iter.Seq2[a2a1.Event, error] {
	return errorStream(a2a1.ErrUnsupportedOperation)
}

func (unsupported03) GetTaskPushConfig(context.Context, a2aclient.ServiceParams, *a2a1.GetTaskPushConfigRequest) (*a2a1.PushConfig, error) {
	return nil, a2a1.ErrUnsupportedOperation
}

func (unsupported03) ListTaskPushConfigs(context.Context, a2aclient.ServiceParams, *a2a1.ListTaskPushConfigRequest) ([]*a2a1.PushConfig, error) {
	return nil, a2a1.ErrUnsupportedOperation
}

func (unsupported03) CreateTaskPushConfig(context.Context, a2aclient.ServiceParams, *a2a1.PushConfig) (*a2a1.PushConfig, error) {
	return nil, a2a1.ErrUnsupportedOperation
}

func (unsupported03) DeleteTaskPushConfig(context.Context, a2aclient.ServiceParams, *a2a1.DeleteTaskPushConfigRequest) error {
	return a2a1.ErrUnsupportedOperation
}

func (unsupported03) GetExtendedAgentCard(context.Context, a2aclient.ServiceParams, *a2a1.GetExtendedAgentCardRequest) (*a2a1.AgentCard, error) {
	return nil, a2a1.ErrUnsupportedOperation
}

func (unsupported03) Destroy() error { return nil }

func errorStream(err error) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) { yield(nil, err) }
}

// addHeaders03 adds the call's service parameters as 0.3 servers expect
// them: lower-case names, A2A-Extensions as X-A2A-Extensions
// (a2av0.FromServiceParams).
func addHeaders03(h http.Header, params a2aclient.ServiceParams) {
	ext := strings.ToLower(a2a1.SvcParamExtensions)
	for k, vs := range params {
		lk := strings.ToLower(k)
		if lk == ext {
			lk = "x-" + lk
		}
		for _, v := range vs {
			h.Add(lk, v)
		}
	}
}

// jsonBody reports whether resp's body is JSON by its media type:
// application/json or any +json (@a2a-js/sdk sends application/a2a+json,
// a2av0's server application/problem+json).
func jsonBody(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
