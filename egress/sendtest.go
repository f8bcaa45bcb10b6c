package egress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/axocoatl/axocoatl-go/lattice"
)

// TestEventType is the event_type of the delivery SendTest sends.
const TestEventType = "WebhookTest"

// maxTestResponse bounds what is read of the answer to a test delivery.
const maxTestResponse = 64 << 10

// SendTest POSTs one test delivery to w (event_type WebhookTest, payload
// {"test":true}), built, signed and stamped exactly as a real one, so that
// the receiver can check its verification (Verify). It makes one attempt,
// bounded by w's timeout and ctx, follows no redirect, and returns the
// answer's status: a 2xx is a receiver that took it. Errors never contain
// the URL's query or credentials, header values or the secret.
func SendTest(ctx context.Context, w Webhook) (status int, err error) {
	if err := w.Validate(); err != nil {
		return 0, err
	}
	w = w.withDefaults()
	h := &hook{cfg: w}
	if !w.Secret.IsZero() {
		key, err := signingKey(w.Secret.Reveal())
		if err != nil {
			return 0, err
		}
		h.sign = newSigner(key)
	}
	now := time.Now()
	d, err := newDelivery(lattice.Event{ID: lattice.NewID(now), Type: TestEventType, ProducedBy: "doctor",
		Timestamp: now.Unix(), Payload: []byte(`{"test":true}`)}, now)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(d.body))
	if err != nil {
		return 0, fmt.Errorf("webhook %s: %s", w.Name, h.describe(err))
	}
	h.stamp(req.Header, d, now)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true // one request: nothing may stay behind
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport:     tr,
		Timeout:       w.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("webhook %s: %s: %s", w.Name, w.Host(), h.describe(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxTestResponse))
	return resp.StatusCode, nil
}
