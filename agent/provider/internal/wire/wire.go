// Package wire is the HTTP client every provider shares: one JSON call,
// bounded by the provider's Timeout, retried while the next attempt fits in
// it, with bodies capped, cross-origin redirects refused, and every failure
// turned into a *provider.Error that never contains the API key.
//
// It is internal so that its shape can follow the providers' needs; what a
// host sees is each provider's Model and provider.Error.
package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axocoatl/axocoatl-go/agent/provider"
)

// Retry policy of a model call. Every attempt and every wait stays inside
// the one deadline of the call (Config.Timeout), and a wait that would not
// fit ends the call with the last real error: a retry that sleeps past the
// deadline would turn a clear "HTTP 429: rate limited" into an opaque
// timeout (the reason the official SDKs' own retries were switched off when
// the providers used them).
const (
	retryBaseDelay  = 500 * time.Millisecond
	retryMaxBackoff = 8 * time.Second
	// A server asking for a longer wait than this is not retried.
	retryMaxServerDelay = 60 * time.Second
	// Error bodies are read up to this size; messages are cut to maxMessage.
	maxErrorBody = 64 << 10
	maxMessage   = 1000
	// A response body is read up to this size: bodies are buffered whole,
	// so a server that never ends one would otherwise fill memory until the
	// timeout. Answers and model lists are far smaller.
	maxResponseBody = 16 << 20
)

// errBodyTooLarge ends the read of a response body over maxResponseBody.
var errBodyTooLarge = fmt.Errorf("response body over %d MiB", maxResponseBody>>20)

// errRedirect refuses a redirect to another origin. Go's client forwards
// every header but Authorization and cookies to the new host, so Anthropic's
// x-api-key (and the request body) would reach whoever the redirect names;
// an https → http redirect would send them in clear text.
var errRedirect = errors.New("redirect to another origin refused (it would carry the API key)")

// Options configure a Client.
type Options struct {
	Kind    string      // provider kind, the prefix of every error
	BaseURL string      // absolute; request paths are appended to its path
	Key     string      // the revealed API key, kept only to scrub it from messages
	Header  http.Header // sent with every request (authentication, API version)
	// Timeout, MaxRetries and HTTPClient as in provider.Config (zero values
	// mean the same defaults).
	Timeout    time.Duration
	MaxRetries int
	HTTPClient *http.Client
}

// Client runs the HTTP calls of one provider. It is safe for concurrent use.
type Client struct {
	kind    string
	base    *url.URL
	key     string
	header  http.Header
	timeout time.Duration
	retries int
	http    *http.Client
}

// New returns a client for o. o.BaseURL must be valid
// (provider.Config.Validate checks it).
func New(o Options) (*Client, error) {
	base, err := url.Parse(o.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("base_url: %q is not a URL", provider.RedactURL(o.BaseURL))
	}
	c := &Client{kind: o.Kind, base: base, key: o.Key, header: o.Header.Clone(), timeout: o.Timeout, retries: o.MaxRetries}
	if c.timeout <= 0 {
		c.timeout = provider.DefaultTimeout
	}
	switch {
	case c.retries == 0:
		c.retries = provider.DefaultMaxRetries
	case c.retries < 0:
		c.retries = 0
	}
	client := o.HTTPClient
	if client == nil {
		// No Client.Timeout: the call's context bounds each call instead.
		client = &http.Client{}
	}
	c.http = guardRedirects(limitBodies(client))
	return c, nil
}

// Kind is the provider kind the client reports errors as.
func (c *Client) Kind() string { return c.kind }

// Call sends one request (in, if not nil, as its JSON body) to path under
// the base URL and decodes a 2xx JSON answer into out (nil: only checked to
// be JSON). With retry, transient failures are retried while the next
// attempt fits before the call's deadline. It returns the answer's bytes,
// for Malformed. Every error is a *provider.Error.
func (c *Client) Call(ctx context.Context, method, path string, in, out any, retry bool) ([]byte, error) {
	body, perr := c.encode(in)
	if perr != nil {
		return nil, perr
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(parent, c.timeout)
	defer cancel()
	a, perr := c.send(parent, ctx, method, path, body, retry, "application/json", false)
	if perr != nil {
		return a.body, perr
	}
	return a.body, c.decode(a, out)
}

// encode is the JSON body of a request (nil for none).
func (c *Client) encode(in any) ([]byte, *provider.Error) {
	if in == nil {
		return nil, nil
	}
	body, err := json.Marshal(in)
	if err != nil {
		return nil, &provider.Error{Provider: c.kind, Message: c.scrub("encoding the request: " + err.Error())}
	}
	return body, nil
}

// send makes attempts until one gets a 2xx answer, retrying transient
// failures (with retry) while the next attempt fits before ctx's deadline.
// parent is the caller's context, ctx the call's own. With keep, the 2xx
// answer's body is left unread in result.resp for the caller to read and
// close.
func (c *Client) send(parent, ctx context.Context, method, path string, body []byte, retry bool, accept string, keep bool) (result, *provider.Error) {
	retries := c.retries
	if !retry {
		retries = 0
	}
	for n := 0; ; n++ {
		a := c.attempt(ctx, method, path, body, accept, keep)
		if a.err == nil && a.status < 300 {
			return a, nil
		}
		perr := c.explain(parent, ctx, a)
		if n >= retries || ctx.Err() != nil || !retryable(a) {
			return a, perr
		}
		delay, ok := retryDelay(a.header, n)
		if dl, has := ctx.Deadline(); !ok || (has && time.Until(dl) <= delay) {
			return a, perr // waiting would outlive the call: report what we know
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return result{}, c.explain(parent, ctx, result{err: ctx.Err()})
		case <-t.C:
		}
	}
}

// result is what one attempt got.
type result struct {
	status int // 0: no response
	header http.Header
	body   []byte
	err    error          // transport failure, refused redirect, or failed body read
	resp   *http.Response // a 2xx answer with its body unread (attempt with keep)
}

func (c *Client) attempt(ctx context.Context, method, path string, body []byte, accept string, keep bool) result {
	u := *c.base
	p, query, _ := strings.Cut(path, "?")
	u.Path = strings.TrimRight(u.Path, "/") + p
	u.RawPath = ""
	if query != "" {
		if u.RawQuery != "" {
			u.RawQuery += "&"
		}
		u.RawQuery += query
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return result{err: err}
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", accept)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		r := result{err: err}
		if resp != nil { // a refused redirect returns the redirect's response
			r.status, r.header = resp.StatusCode, resp.Header
		}
		return r
	}
	r := result{status: resp.StatusCode, header: resp.Header}
	if keep && resp.StatusCode < 300 {
		r.resp = resp
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		// Only the message is wanted; a cut or broken error body still has it.
		r.body, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return r
	}
	// limitedBody fails past maxResponseBody.
	r.body, r.err = io.ReadAll(resp.Body)
	return r
}

// decode reads a 2xx answer into out.
func (c *Client) decode(a result, out any) error {
	if ct := a.header.Get("Content-Type"); !isJSONType(ct) {
		return &provider.Error{Provider: c.kind, Status: a.status,
			Message: c.scrub(fmt.Sprintf("malformed response: content-type %q, want application/json", ct))}
	}
	if out == nil {
		out = new(json.RawMessage)
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		return &provider.Error{Provider: c.kind, Status: a.status, Message: c.scrub("malformed response: " + decodeProblem(err))}
	}
	return nil
}

// limitBodies returns a copy of client whose response bodies fail with
// errBodyTooLarge past maxResponseBody.
func limitBodies(client *http.Client) *http.Client {
	c := *client
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = bodyLimit{base: base}
	return &c
}

// guardRedirects makes client (a copy of the configured one) follow
// redirects within the origin only, unless it has its own policy.
func guardRedirects(client *http.Client) *http.Client {
	if client.CheckRedirect != nil {
		return client
	}
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if from := via[0].URL; req.URL.Scheme != from.Scheme || req.URL.Host != from.Host {
			return fmt.Errorf("%w: %s://%s", errRedirect, req.URL.Scheme, req.URL.Host)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return client
}

type bodyLimit struct{ base http.RoundTripper }

func (t bodyLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp.Body != nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxResponseBody}
	}
	return resp, err
}

type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errBodyTooLarge
	}
	// Read one byte past the limit to tell a body of exactly the limit,
	// which is fine, from a longer one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n + int(b.left), errBodyTooLarge
	}
	return n, err
}

// retryable reports whether a failed attempt may succeed when repeated: a
// transport failure (http.Client errors are *url.Error; anything else failed
// before sending), or a status the APIs document as transient. The server's
// x-should-retry header wins, as in the official SDKs.
func retryable(a result) bool {
	if errors.Is(a.err, errRedirect) || errors.Is(a.err, errBodyTooLarge) {
		return false
	}
	if a.status == 0 {
		var uerr *url.Error
		return errors.As(a.err, &uerr)
	}
	switch a.header.Get("x-should-retry") {
	case "true":
		return true
	case "false":
		return false
	}
	s := a.status
	return s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500
}

// retryDelay is the wait before retry n (0-based): what the server asked for
// (Retry-After-Ms, Retry-After in seconds or as an HTTP date), else
// exponential backoff with jitter. ok is false when the server asked for a
// wait longer than retryMaxServerDelay.
func retryDelay(h http.Header, n int) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			d := time.Duration(ms * float64(time.Millisecond))
			return d, d <= retryMaxServerDelay
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			if s > retryMaxServerDelay.Seconds() {
				return 0, false
			}
			return time.Duration(s * float64(time.Second)), true
		}
		if t, err := http.ParseTime(v); err == nil {
			d := max(time.Until(t), 0)
			return d, d <= retryMaxServerDelay
		}
	}
	d := min(retryBaseDelay<<min(n, 10), retryMaxBackoff)
	return d - rand.N(d/4+1), true
}

// explain turns a failed attempt into an *Error. parent is the caller's
// context, ctx the call's own (parent plus Timeout).
func (c *Client) explain(parent, ctx context.Context, a result) *provider.Error {
	e := &provider.Error{Provider: c.kind, Status: a.status}
	switch {
	case ctx.Err() != nil:
		e.Status = 0
		e.Err = ctx.Err()
		switch {
		case parent.Err() != nil:
			e.Message = "call abandoned: " + parent.Err().Error()
		default:
			e.Message = fmt.Sprintf("no response within %s (timeout)", c.timeout)
		}
	case errors.Is(a.err, errRedirect):
		e.Err = errRedirect
		err := a.err
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without the URL, which may carry a query
		}
		e.Message = err.Error()
	case errors.Is(a.err, errBodyTooLarge):
		e.Message = errBodyTooLarge.Error()
	case a.status >= 300:
		e.Message = errorMessage(a.status, a.body)
	case a.status != 0:
		// The answer started but could not be read whole.
		e.Err = a.err
		e.Message = "reading the response: " + a.err.Error()
	default:
		err := a.err
		var uerr *url.Error
		if errors.As(err, &uerr) {
			// url.Error repeats the URL; the cause is what helps.
			err = uerr.Err
		}
		e.Err = err
		e.Message = "request failed: " + err.Error()
	}
	e.Message = c.scrub(e.Message)
	return e
}

// scrub removes the API key from text that came from the network, and
// bounds its length.
func (c *Client) scrub(s string) string {
	if c.key != "" {
		s = strings.ReplaceAll(s, c.key, "[redacted]")
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// errorMessage is the provider's own error message from an error response,
// found in the shapes OpenAI, Anthropic, Ollama and common OpenAI-compatible
// servers use; else the start of a non-JSON body; else the status text.
func errorMessage(status int, body []byte) string {
	if msg := jsonMessage(body); msg != "" {
		return msg
	}
	text := strings.TrimSpace(string(body))
	if text == "" || strings.HasPrefix(text, "{") || strings.HasPrefix(text, "<") {
		// Empty, JSON without a message, or an HTML error page: the status says more.
		return http.StatusText(status)
	}
	return text
}

// jsonMessage finds an error message in a JSON body, in the shapes OpenAI,
// Anthropic, Ollama and common OpenAI-compatible servers use; "" if none.
func jsonMessage(body []byte) string {
	var shape struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &shape) != nil {
		return ""
	}
	var inner struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	}
	var s string
	switch {
	case json.Unmarshal(shape.Error, &inner) == nil && inner.Message != "":
		return inner.Message
	case json.Unmarshal(shape.Error, &s) == nil && s != "":
		return s
	case shape.Message != "":
		return shape.Message
	case json.Unmarshal(shape.Detail, &s) == nil && s != "":
		return s
	case inner.Type != "":
		return inner.Type
	}
	return ""
}

// Malformed is the failure of a 2xx answer that decoded but is not an
// answer (no choices, no content). An error message in the body, as some
// gateways send with a 200, is kept.
func (c *Client) Malformed(raw []byte, what string) *provider.Error {
	msg := "malformed response: " + what
	if m := jsonMessage(raw); m != "" {
		msg += ": " + m
	}
	return &provider.Error{Provider: c.kind, Status: http.StatusOK, Message: c.scrub(msg)}
}

// decodeProblem says why a 2xx body could not be decoded.
func decodeProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON: %s (at byte %d)", syn.Error(), syn.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "invalid JSON: the body ends too early"
	case errors.As(err, &typ):
		return "unexpected JSON: " + typ.Error()
	}
	return err.Error()
}

// isJSONType reports whether a Content-Type is JSON.
func isJSONType(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return strings.Contains(mt, "application/json") || strings.HasSuffix(mt, "+json")
}

// SchemaObject decodes a tool's JSON Schema. Zero means an object with any
// properties. An object schema gets an explicit empty "properties", which
// some compatible servers insist on.
func SchemaObject(raw json.RawMessage) (map[string]any, error) {
	schema := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &schema); err != nil {
			return nil, fmt.Errorf("input schema is not a JSON object: %w", err)
		}
	}
	if _, ok := schema["type"]; !ok {
		schema["type"] = "object"
	}
	if schema["type"] == "object" {
		if _, ok := schema["properties"]; !ok {
			schema["properties"] = map[string]any{}
		}
	}
	return schema, nil
}

// ArgumentsJSON turns the arguments text a model produced into the JSON the
// tool receives. Empty means no arguments; text that is not JSON is passed
// as a JSON string, so the tool rejects it and the model hears why.
func ArgumentsJSON(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage(`{}`)
	}
	return CompactJSON([]byte(s))
}

// CompactJSON returns valid JSON without insignificant spaces, so tools and
// events see one spelling whatever the model produced; text that is not
// JSON becomes a JSON string.
func CompactJSON(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err == nil {
		return buf.Bytes()
	}
	q, _ := json.Marshal(string(b))
	return q
}

// ArgumentsText is the inverse of ArgumentsJSON, for replaying an
// assistant turn.
func ArgumentsText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	return string(raw)
}

// Unmarshal decodes a 2xx answer read whole, failing as Call does on a
// body that is not the JSON expected.
func (c *Client) Unmarshal(raw []byte, out any) error {
	if err := json.Unmarshal(raw, out); err != nil {
		return &provider.Error{Provider: c.kind, Status: http.StatusOK, Message: c.scrub("malformed response: " + decodeProblem(err))}
	}
	return nil
}

// Failed is the error a provider reported inside a 2xx answer that had
// started (an error event of a stream); raw is the event's JSON.
func (c *Client) Failed(raw []byte) *provider.Error {
	msg := jsonMessage(raw)
	switch text := strings.TrimSpace(string(raw)); {
	case msg != "":
	case text != "" && !strings.HasPrefix(text, "{"):
		msg = text // not JSON: the text is the message (scrub bounds it)
	default:
		msg = "(no message)"
	}
	return &provider.Error{Provider: c.kind, Status: http.StatusOK, Message: c.scrub("the answer failed mid-stream: " + msg)}
}
