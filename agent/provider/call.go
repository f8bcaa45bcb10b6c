package provider

import (
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
)

// Retry policy of a model call. The SDKs' own retries are switched off: the
// OpenAI SDK and the Anthropic SDK differ (the Anthropic one sleeps for any
// Retry-After it is given), and a retry that sleeps past Config.Timeout turns
// a clear "HTTP 429: rate limited" into an opaque timeout. Retrying here keeps
// every attempt and every wait inside the one deadline of the call, and gives
// up with the last real error when the next wait would not fit.
const (
	// DefaultMaxRetries is the number of retries when Config.MaxRetries is zero.
	DefaultMaxRetries = 2
	retryBaseDelay    = 500 * time.Millisecond
	retryMaxBackoff   = 8 * time.Second
	// A server asking for a longer wait than this is not retried.
	retryMaxServerDelay = 60 * time.Second
	// Error bodies are read up to this size; messages are cut to maxMessage.
	maxErrorBody = 64 << 10
	maxMessage   = 1000
	// A response body is read up to this size: the SDKs buffer bodies
	// whole, so a server that never ends one would otherwise fill memory
	// until the timeout. Answers and model lists are far smaller.
	maxResponseBody = 16 << 20
)

// errBodyTooLarge ends the read of a response body over maxResponseBody.
var errBodyTooLarge = fmt.Errorf("response body over %d MiB", maxResponseBody>>20)

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

// errRedirect refuses a redirect to another origin. Go's client forwards
// every header but Authorization and cookies to the new host, so Anthropic's
// x-api-key (and the request body) would reach whoever the redirect names;
// an https → http redirect would send them in clear text.
var errRedirect = errors.New("redirect to another origin refused (it would carry the API key)")

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

// caller runs the HTTP calls of one provider: bounded, retried, and with
// failures turned into *Error values that never contain the API key.
type caller struct {
	kind    string
	key     string // the revealed API key, kept only to scrub it from messages
	timeout time.Duration
	retries int
}

func newCaller(kind string, cfg Config) caller {
	c := caller{kind: kind, key: cfg.APIKey.Reveal(), timeout: cfg.Timeout, retries: cfg.MaxRetries}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	switch {
	case c.retries == 0:
		c.retries = DefaultMaxRetries
	case c.retries < 0:
		c.retries = 0
	}
	return c
}

// attempt is one try of a call. It records the HTTP response it got (the SDK
// fills it through option.WithResponseInto) so that a failure can be
// explained with the status and the provider's own message.
type attempt func(ctx context.Context, resp **http.Response) error

// do runs try under the call's deadline, retrying transient failures while
// the next attempt still fits before the deadline.
func (c caller) do(parent context.Context, retries int, try attempt) error {
	ctx, cancel := context.WithTimeout(parent, c.timeout)
	defer cancel()
	for n := 0; ; n++ {
		var resp *http.Response
		err := try(ctx, &resp)
		if err == nil {
			return nil
		}
		perr := c.explain(parent, ctx, resp, err)
		if n >= retries || ctx.Err() != nil || !retryable(resp, err) {
			return perr
		}
		delay, ok := retryDelay(resp, n)
		if dl, has := ctx.Deadline(); !ok || (has && time.Until(dl) <= delay) {
			return perr // waiting would outlive the call: report what we know
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return c.explain(parent, ctx, nil, ctx.Err())
		case <-t.C:
		}
	}
}

// retryable reports whether a failed attempt may succeed when repeated: a
// transport failure (http.Client errors are *url.Error; anything else failed
// before sending), or a status the APIs document as transient. The server's
// x-should-retry header wins, as in the SDKs.
func retryable(resp *http.Response, err error) bool {
	if errors.Is(err, errRedirect) {
		return false
	}
	if resp == nil {
		var uerr *url.Error
		return errors.As(err, &uerr)
	}
	switch resp.Header.Get("x-should-retry") {
	case "true":
		return true
	case "false":
		return false
	}
	s := resp.StatusCode
	return s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500
}

// retryDelay is the wait before retry n (0-based): what the server asked for
// (Retry-After-Ms, Retry-After in seconds or as an HTTP date), else
// exponential backoff with jitter. ok is false when the server asked for a
// wait longer than retryMaxServerDelay.
func retryDelay(resp *http.Response, n int) (time.Duration, bool) {
	if resp != nil {
		if v := resp.Header.Get("Retry-After-Ms"); v != "" {
			if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
				d := time.Duration(ms * float64(time.Millisecond))
				return d, d <= retryMaxServerDelay
			}
		}
		if v := resp.Header.Get("Retry-After"); v != "" {
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
	}
	d := min(retryBaseDelay<<min(n, 10), retryMaxBackoff)
	return d - rand.N(d/4+1), true
}

// explain turns a failed attempt into an *Error. parent is the caller's
// context, ctx the call's own (parent plus Timeout).
func (c caller) explain(parent, ctx context.Context, resp *http.Response, err error) *Error {
	e := &Error{Provider: c.kind}
	switch {
	case ctx.Err() != nil:
		e.Err = ctx.Err()
		switch {
		case parent.Err() != nil:
			e.Message = "call abandoned: " + parent.Err().Error()
		default:
			e.Message = fmt.Sprintf("no response within %s (timeout)", c.timeout)
		}
	case errors.Is(err, errRedirect):
		if resp != nil {
			e.Status = resp.StatusCode
		}
		e.Err = errRedirect
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without the URL, which may carry a query
		}
		e.Message = err.Error()
	case resp != nil && resp.StatusCode >= 400:
		e.Status = resp.StatusCode
		e.Message = errorMessage(resp)
	case resp != nil && errors.Is(err, errBodyTooLarge):
		e.Status = resp.StatusCode
		e.Message = errBodyTooLarge.Error()
	case resp != nil:
		// The server answered but the SDK could not read the answer.
		e.Status = resp.StatusCode
		if ct := resp.Header.Get("Content-Type"); !isJSONType(ct) {
			e.Message = fmt.Sprintf("malformed response: content-type %q, want application/json", ct)
		} else {
			e.Message = "malformed response: " + decodeProblem(err)
		}
	default:
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

// scrub removes the API key from text that came from the network or the
// SDKs, and bounds its length.
func (c caller) scrub(s string) string {
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
func errorMessage(resp *http.Response) string {
	var body []byte
	if resp.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	}
	if msg := jsonMessage(body); msg != "" {
		return msg
	}
	text := strings.TrimSpace(string(body))
	if text == "" || strings.HasPrefix(text, "{") || strings.HasPrefix(text, "<") {
		// Empty, JSON without a message, or an HTML error page: the status says more.
		return http.StatusText(resp.StatusCode)
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

// malformed is the failure of a 2xx answer that is not an answer (the SDKs
// decode leniently: missing or mistyped fields come back as zero values).
// An error message in the body, as some gateways send with a 200, is kept.
func (c caller) malformed(raw, what string) *Error {
	msg := "malformed response: " + what
	if m := jsonMessage([]byte(raw)); m != "" {
		msg += ": " + m
	}
	return &Error{Provider: c.kind, Status: http.StatusOK, Message: c.scrub(msg)}
}

// decodeProblem says why a 2xx body could not be decoded, without the SDK's
// wording around it.
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

// isJSONType reports whether a Content-Type is JSON, as the SDKs decide it.
func isJSONType(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return strings.Contains(mt, "application/json") || strings.HasSuffix(mt, "+json")
}
