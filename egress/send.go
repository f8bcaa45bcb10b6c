package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/axocoatl/axocoatl-go/internal/netguard"
)

type outcome int

const (
	outcomeDelivered outcome = iota
	outcomeFailed            // not retryable
	outcomeExhausted         // retryable, attempts used up
)

// newClient builds the webhook's retrying client. It has no logger:
// retryablehttp's would print the full URL with its query string; egress
// records and logs each attempt itself, without either.
func (h *hook) newClient(rt http.RoundTripper) *retryablehttp.Client {
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = h.cfg.Concurrency
		rt = t
	}
	return &retryablehttp.Client{
		HTTPClient: &http.Client{
			Transport: rt,
			Timeout:   h.cfg.Timeout, // per attempt: each attempt is one Client.Do
			// Redirects are not followed: a 3xx is the answer (and not
			// retried), so a receiver cannot point egress elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Logger:         nil,
		RetryWaitMin:   h.cfg.BackoffBase,
		RetryWaitMax:   h.cfg.BackoffMax,
		RetryMax:       math.MaxInt32, // each delivery's own budget is enforced in checkRetry
		RequestLogHook: h.beforeAttempt,
		CheckRetry:     h.checkRetry,
		Backoff:        h.backoff,
		ErrorHandler:   retryablehttp.PassthroughErrorHandler,
		PrepareRetry:   h.prepareRetry,
	}
}

// attemptState follows one delivery through the client's attempts; it
// rides in the request's context.
type attemptState struct {
	d         *delivery
	start     time.Time
	retryable bool
	exhausted bool
	// parent is the context of the delivery's trace (trace.go); span is
	// the attempt's in flight.
	parent context.Context
	span   trace.Span
}

type stateKey struct{}

func stateOf(ctx context.Context) *attemptState {
	s, _ := ctx.Value(stateKey{}).(*attemptState)
	return s
}

// send makes up to the remaining attempts of d.
func (h *hook) send(ctx context.Context, d *delivery) outcome {
	st := &attemptState{d: d, parent: h.m.tracing.parent(ctx, d)}
	req, err := retryablehttp.NewRequestWithContext(context.WithValue(ctx, stateKey{}, st), http.MethodPost, h.urlOf(d), d.body)
	if err != nil { // the URL was validated; only a broken one gets here
		h.record(st, 0, fmt.Errorf("building the request: %w", err))
		return outcomeFailed
	}
	h.stamp(req.Header, d, time.Now())
	resp, err := h.clientFor(d).Do(req)
	if resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
	switch {
	case err == nil && resp != nil && resp.StatusCode >= 200 && resp.StatusCode < 300:
		return outcomeDelivered
	case st.retryable && st.exhausted:
		return outcomeExhausted
	}
	return outcomeFailed
}

func (h *hook) beforeAttempt(_ retryablehttp.Logger, r *http.Request, _ int) {
	if st := stateOf(r.Context()); st != nil {
		h.startAttempt(st, r)
		st.start = time.Now()
	}
}

// prepareRetry stamps a new timestamp and signature for the next attempt
// (the body and delivery_id stay). The header map is copied: the previous
// attempt's transport may still hold the old one.
func (h *hook) prepareRetry(r *http.Request) error {
	r.Header = r.Header.Clone()
	if st := stateOf(r.Context()); st != nil {
		h.stamp(r.Header, st.d, time.Now())
	}
	return nil
}

// checkRetry records the attempt just made and says whether to make
// another: on connection errors and timeouts, 5xx and 429, while the
// delivery has attempts left. Other 4xx and every 3xx end it.
func (h *hook) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	st := stateOf(ctx)
	if ctx.Err() != nil {
		if st != nil {
			h.endAttempt(st, 0, context.Canceled, false)
		}
		return false, ctx.Err() // stopping: not an attempt
	}
	code := 0
	if err == nil && resp != nil {
		code = resp.StatusCode
	}
	var ne net.Error
	h.endAttempt(st, code, err, errors.As(err, &ne) && ne.Timeout())
	var retry bool
	switch {
	case errors.Is(err, netguard.ErrRefused):
		// The guard refused the address dialed: another attempt would
		// dial the same.
	case err != nil:
		retry, _ = retryablehttp.DefaultRetryPolicy(ctx, nil, err)
	case code == http.StatusTooManyRequests || code >= 500:
		retry = true
	}
	used := h.record(st, code, err)
	st.retryable = retry
	if retry && used >= h.cfg.MaxAttempts {
		st.exhausted = true
		return false, nil
	}
	return retry, nil
}

// record appends one attempt to the delivery and returns how many attempts
// count against MaxAttempts. A failed attempt that will be retried is
// saved, so a restart continues the count.
func (h *hook) record(st *attemptState, code int, err error) int {
	now := time.Now()
	latency := time.Duration(0)
	if !st.start.IsZero() {
		latency = now.Sub(st.start)
	}
	a := Attempt{At: now.UTC(), StatusCode: code, LatencyMS: float64(latency.Microseconds()) / 1000}
	switch {
	case err != nil:
		a.Error = h.describe(err)
	case code < 200 || code > 299:
		a.Error = fmt.Sprintf("HTTP %d %s", code, http.StatusText(code))
	}
	h.series.attempts[resultLabel(code, err)].Inc()
	h.series.latency.Observe(latency.Seconds())
	d := st.d
	h.mu.Lock()
	d.attempts = append(d.attempts, a)
	if over := len(d.attempts) - maxAttemptHistory; over > 0 {
		d.attempts = d.attempts[over:]
		d.base = max(d.base-over, 0)
	}
	used := len(d.attempts) - d.base
	if a.Error != "" {
		d.lastError = a.Error
		h.lastError, h.lastErrAt = a.Error, now
	}
	var rec record
	if a.Error != "" {
		rec = d.record()
	}
	h.mu.Unlock()
	if a.Error != "" {
		h.m.backendOf(h).attempted(h, d, rec)
	}
	return used
}

func resultLabel(code int, err error) string {
	switch {
	case err != nil || code == 0:
		return "error"
	case code < 300:
		return "2xx"
	case code < 400:
		return "3xx"
	case code < 500:
		return "4xx"
	}
	return "5xx"
}

// describe words a transport error without the URL (its query may hold a
// credential).
func (h *hook) describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Sprintf("timeout after %s", h.cfg.Timeout)
	}
	return err.Error()
}

// backoff is the wait before retry attempt+1: a Retry-After (seconds or an
// HTTP date) when the response has one, else a random time in
// [0, min(max, base·2^attempt)] (full jitter); never more than max.
func (h *hook) backoff(base, ceil time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if ra, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return min(ra, ceil)
		}
	}
	return fullJitter(base, ceil, attempt)
}

func fullJitter(base, ceil time.Duration, attempt int) time.Duration {
	bound := ceil
	if attempt < 62 && base < ceil>>attempt { // base·2^attempt < ceil, without overflow
		bound = base << attempt
	}
	return time.Duration(rand.Int64N(int64(bound) + 1))
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		if s > int64(math.MaxInt64/time.Second) {
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
