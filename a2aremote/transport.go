package a2aremote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/axocoatl/axocoatl-go/internal/tracehttp"
	"go.opentelemetry.io/otel/propagation"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"golang.org/x/mod/semver"

	"github.com/axocoatl/axocoatl-go/internal/a2awire"
)

// ErrResponseTooLarge: a remote's HTTP response went over
// [AgentConfig].MaxResponseBytes (or its card over [DefaultMaxCardBytes]).
var ErrResponseTooLarge = errors.New("a2a response over its bound")

// newHTTPClient is the HTTP client of one remote agent: it adds the
// configured headers to every request, bounds every response body, and
// follows no redirect (a redirect would carry the headers, which are
// credentials, to wherever the remote points). It has no overall timeout:
// each call's context carries the agent's timeout, and a streamed answer
// may legitimately last that long.
//
// prop, when set, puts the trace context of a request's span (a call's:
// see remote.startSpan) in its traceparent and tracestate headers.
func newHTTPClient(a AgentConfig, base http.RoundTripper, prop propagation.TextMapPropagator) *http.Client {
	h := make(http.Header, len(a.Headers))
	for k, v := range a.Headers {
		h.Set(k, v.Reveal())
	}
	return &http.Client{
		Transport: &roundTripper{base: base, headers: h, limit: int64(a.maxResponse()), prop: prop},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// newTransport is an [http.Transport] with the settings of
// [http.DefaultTransport], owned by its caller, who closes its idle
// connections when done.
func newTransport() *http.Transport {
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		return dt.Clone()
	}
	return &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
}

type roundTripper struct {
	base    http.RoundTripper
	headers http.Header
	limit   int64
	prop    propagation.TextMapPropagator // nil: no trace headers
}

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header[k] = v
		}
	}
	req = tracehttp.InjectHeaders(t.prop, req, len(t.headers) > 0)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.limit, limit: t.limit}
	return resp, nil
}

// limitedBody fails the read that would go past limit, so a decoder
// reports the bound instead of a truncated document.
type limitedBody struct {
	rc    io.ReadCloser
	left  int64
	limit int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly limit bytes from a longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%w: more than %d bytes", ErrResponseTooLarge, b.limit)
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// fetchCard reads and parses the agent card at cardURL with hc. The body
// is bounded by [DefaultMaxCardBytes]. Both generations parse: a 1.0 card
// by its supportedInterfaces, a 0.3 card by url, preferredTransport and
// additionalInterfaces ([a2awire.ParseCard]).
func fetchCard(ctx context.Context, hc *http.Client, cardURL string) (*a2a1.AgentCard, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cardURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("agent card: HTTP status %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, DefaultMaxCardBytes+1))
	if err != nil {
		return nil, fmt.Errorf("agent card: %w", err)
	}
	if len(body) > DefaultMaxCardBytes {
		return nil, fmt.Errorf("agent card: %w: more than %d bytes", ErrResponseTooLarge, DefaultMaxCardBytes)
	}
	card, err := a2awire.ParseCard(body)
	if err != nil {
		return nil, fmt.Errorf("agent card is not JSON of an A2A card: %w", err)
	}
	if len(card.SupportedInterfaces) == 0 {
		return nil, errors.New("agent card names no interface (neither supportedInterfaces nor url)")
	}
	for _, iface := range card.SupportedInterfaces {
		if iface == nil { // "supportedInterfaces":[null]
			return nil, errors.New("agent card names a null interface")
		}
		u, err := url.Parse(iface.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("agent card: interface URL %q is not an absolute http or https URL", iface.URL)
		}
	}
	return card, nil
}

// Generation is the protocol generation a card is spoken to in: the
// newest version among its interfaces this client has a transport for
// ("1.0" or "0.3"), "" when there is none.
func Generation(card *a2a1.AgentCard) string {
	best := ""
	for _, iface := range card.SupportedInterfaces {
		switch iface.ProtocolBinding {
		case a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON:
		default:
			continue
		}
		v := string(iface.ProtocolVersion)
		if v == "" {
			v = string(a2awire.Version03)
		}
		var g string
		switch semver.Major("v" + strings.TrimPrefix(v, "v")) {
		case "v1":
			g = "1.0"
		case "v0":
			g = "0.3"
		default:
			continue
		}
		if best == "" || g == "1.0" {
			best = g
		}
	}
	return best
}

// newClient builds the a2aclient for card: JSON-RPC and HTTP+JSON, in
// 1.0 and in 0.3 (transport03.go), all over hc; the factory picks the newest
// version the card offers. 1.0 JSON-RPC is a2aclient's transport with
// SendMessage of our own (sendTransport).
func newClient(ctx context.Context, card *a2a1.AgentCard, hc *http.Client) (*a2aclient.Client, error) {
	opts := append([]a2aclient.FactoryOption{
		a2aclient.WithTransport(a2a1.TransportProtocolJSONRPC, a2aclient.TransportFactoryFn(
			func(_ context.Context, _ *a2a1.AgentCard, iface *a2a1.AgentInterface) (a2aclient.Transport, error) {
				return newSendTransport(iface.URL, hc), nil
			})),
		a2aclient.WithRESTTransport(hc),
	}, withTransports03(hc)...)
	return a2aclient.NewFromCard(ctx, card, opts...)
}

// sendTransport is a2aclient's A2A 1.0 JSON-RPC transport with a
// SendMessage of its own, the method every call of a remote that lists
// tasks makes. a2aclient's reads each answer five times over (a decoder,
// the JSON-RPC envelope, the event wrapper, then twice in
// StreamResponse), which made a call through it about 9 % slower than one
// that reads it once (bench/README.md, A2A remote agents); the request
// and the types it decodes into are the same. Every other method is
// a2aclient's.
type sendTransport struct {
	a2aclient.Transport
	url string
	hc  *http.Client
	ids atomic.Uint64
}

func newSendTransport(url string, hc *http.Client) *sendTransport {
	return &sendTransport{Transport: a2aclient.NewJSONRPCTransport(url, hc), url: url, hc: hc}
}

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      string `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// newRPCRequest is the HTTP request of a JSON-RPC call of method with
// params to u, its id the next of ids.
func newRPCRequest(ctx context.Context, u string, ids *atomic.Uint64, method string, params any) (*http.Request, error) {
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: strconv.FormatUint(ids.Add(1), 10), Method: method, Params: params})
	if err != nil {
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	return hr, nil
}

// readBody reads the body of an answer, bounded by
// [AgentConfig].MaxResponseBytes (limitedBody).
func readBody(resp *http.Response) ([]byte, error) {
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	return data, nil
}

// SendMessage implements [a2aclient.Transport].
func (t *sendTransport) SendMessage(ctx context.Context, params a2aclient.ServiceParams, req *a2a1.SendMessageRequest) (a2a1.SendMessageResult, error) {
	hr, err := newRPCRequest(ctx, t.url, &t.ids, a2awire.Method1Send, req)
	if err != nil {
		return nil, err
	}
	for k, vs := range params {
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	resp, err := t.hc.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("unexpected HTTP status %s", resp.Status)
	}
	data, err := readBody(resp)
	if err != nil {
		return nil, err
	}
	var answer struct {
		Result *struct {
			Task    *a2a1.Task    `json:"task"`
			Message *a2a1.Message `json:"message"`
		} `json:"result"`
		Error *a2awire.Error `json:"error"`
	}
	if err := json.Unmarshal(data, &answer); err != nil {
		return nil, fmt.Errorf("the answer is not a JSON-RPC response: %w", err)
	}
	switch r := answer.Result; {
	case answer.Error != nil:
		return nil, answer.Error.Err1()
	case r == nil:
		return nil, errors.New("the answer has neither a result nor an error")
	case (r.Task == nil) == (r.Message == nil):
		return nil, errors.New("the result violates A2A: it must be exactly one of task and message")
	case r.Task != nil:
		return r.Task, nil
	default:
		return r.Message, nil
	}
}
