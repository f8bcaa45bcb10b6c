package egress

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Events reach a real receiver with the contract's body and headers, both
// signatures recomputed by the receiver; the filter decides what is sent;
// static headers are added; egress's own events are never sent.
func TestDeliverSignedAndFiltered(t *testing.T) {
	const sec = "whsec_" + "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	all := newReceiver(t, sec, nil)
	tools := newReceiver(t, "", nil)
	h := start(t, Config{Webhooks: []Webhook{
		fast(Webhook{Name: "all", URL: all.url(), Secret: sec, Headers: map[string]secret.Secret{"Authorization": "Bearer static"}}),
		fast(Webhook{Name: "tools", URL: tools.url(), Events: []string{"Tool*"}}),
	}})
	h.publish(t, axocoatl.EventTaskCompleted, 0, 3)
	h.publish(t, axocoatl.EventToolCalled, 0, 2)
	h.publish(t, "Deployed", 0, 1)
	if err := h.eng.Publish(t.Context(), "Deployed", ProducerName, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "deliveries", func() bool { return all.count() == 4 && tools.count() == 2 })
	time.Sleep(50 * time.Millisecond) // nothing more may come
	if all.count() != 4 || tools.count() != 2 {
		t.Fatalf("all got %d, tools got %d", all.count(), tools.count())
	}
	for _, r := range all.requests() {
		if r.msg.EventType == axocoatl.EventToolCalled || r.msg.ProducedBy == ProducerName {
			t.Errorf("all received %s from %s", r.msg.EventType, r.msg.ProducedBy)
		}
		if r.header.Get("Authorization") != "Bearer static" {
			t.Errorf("static header missing: %v", r.header)
		}
		if err := Verify(sec, r.header, r.body, 0); err != nil {
			t.Errorf("Verify refused a real delivery: %v", err)
		}
		if !json.Valid(r.msg.Payload) || !strings.Contains(string(r.msg.Payload), `"n"`) {
			t.Errorf("payload %s", r.msg.Payload)
		}
	}
	for _, r := range tools.requests() {
		if r.msg.EventType != axocoatl.EventToolCalled {
			t.Errorf("tools received %s", r.msg.EventType)
		}
	}
	st := h.status(t, "all")
	if st.Delivered != 4 || st.Queued != 0 || st.InFlight != 0 || st.Host != all.srv.Listener.Addr().String() {
		t.Fatalf("status %+v", st)
	}
}

// 503, 503, 200: three attempts with the same delivery_id and body, and
// gaps that grow: with full jitter one gap is random, so 60 deliveries are
// measured and the mean second gap must be clearly above the mean first.
func TestRetry503Then200(t *testing.T) {
	const n = 60
	base := 200 * time.Millisecond
	rc := newReceiver(t, "s", func(_ received, seen int) int {
		if seen < 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	h := start(t, Config{Webhooks: []Webhook{{Name: "w", URL: rc.url(), Secret: "s", BackoffBase: base, BackoffMax: 10 * time.Second, Concurrency: 8}}})
	h.publish(t, "Deployed", 0, n)
	waitFor(t, 20*time.Second, "all delivered", func() bool { return h.status(t, "w").Delivered == n })
	var gap1, gap2 time.Duration
	for id, reqs := range rc.byDelivery() {
		if len(reqs) != 3 {
			t.Fatalf("delivery %s: %d attempts, want 3", id, len(reqs))
		}
		for _, r := range reqs[1:] {
			if string(r.body) != string(reqs[0].body) {
				t.Fatalf("body changed between attempts:\n%s\n%s", reqs[0].body, r.body)
			}
		}
		g1, g2 := reqs[1].at.Sub(reqs[0].at), reqs[2].at.Sub(reqs[1].at)
		// Bounds: [0, base] then [0, 2·base], plus scheduling slack (2 s:
		// a loaded machine's stalls; still far under BackoffMax's 10 s).
		if g1 > base+2*time.Second || g2 > 2*base+2*time.Second {
			t.Errorf("delivery %s: gaps %s, %s exceed the backoff bounds", id, g1, g2)
		}
		gap1 += g1
		gap2 += g2
	}
	gap1, gap2 = gap1/n, gap2/n
	t.Logf("mean gaps %s, %s (bounds %s, %s)", gap1, gap2, base, 2*base)
	if gap2 < gap1*13/10 {
		t.Errorf("gaps did not grow: mean %s then %s", gap1, gap2)
	}
	var ds struct{ Deliveries []Delivery }
	h.api(t, "GET", "/api/webhooks/w/deliveries?status=delivered", &ds)
	if len(ds.Deliveries) != n {
		t.Fatalf("API lists %d delivered", len(ds.Deliveries))
	}
	a := ds.Deliveries[0].Attempts
	if len(a) != 3 || a[0].StatusCode != 503 || a[1].StatusCode != 503 || a[2].StatusCode != 200 || a[0].Error != "HTTP 503 Service Unavailable" || a[2].Error != "" {
		t.Fatalf("attempts %+v", a)
	}
}

// 429 with Retry-After: 1 waits about a second (the backoff alone would
// wait at most 20ms); Retry-After: 86400 is capped at BackoffMax.
//
// Guards: bound webhooks[].backoff_max (docs/bounds.md).
func TestRetryAfterHonouredAndCapped(t *testing.T) {
	for _, c := range []struct {
		after    string
		max      time.Duration
		min, top time.Duration
	}{
		{"1", 5 * time.Second, 900 * time.Millisecond, 2 * time.Second},
		{"86400", 300 * time.Millisecond, 250 * time.Millisecond, 1200 * time.Millisecond},
	} {
		t.Run(c.after, func(t *testing.T) {
			rc := newReceiverWrapped(t, "", func(_ received, seen int) int {
				if seen == 1 {
					return http.StatusTooManyRequests
				}
				return http.StatusOK
			}, func(w http.ResponseWriter) http.ResponseWriter {
				return &retryAfterWriter{ResponseWriter: w, after: c.after}
			})
			h := start(t, Config{Webhooks: []Webhook{{Name: "w", URL: rc.url(), BackoffBase: 20 * time.Millisecond, BackoffMax: c.max}}})
			h.publish(t, "Deployed", 0, 1)
			waitFor(t, 10*time.Second, "delivered", func() bool { return h.status(t, "w").Delivered == 1 })
			reqs := rc.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d attempts", len(reqs))
			}
			if gap := reqs[1].at.Sub(reqs[0].at); gap < c.min || gap > c.top {
				t.Fatalf("Retry-After %s: waited %s, want within [%s, %s]", c.after, gap, c.min, c.top)
			}
		})
	}
}

type retryAfterWriter struct {
	http.ResponseWriter
	after string
}

func (w *retryAfterWriter) WriteHeader(code int) {
	if code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", w.after)
	}
	w.ResponseWriter.WriteHeader(code)
}

// 400, 410 and 302 end a delivery at the first attempt; the redirect is
// not followed.
func TestNotRetried(t *testing.T) {
	for _, code := range []int{400, 410, 302} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			target := newReceiver(t, "", nil)
			rc := newReceiverWrapped(t, "", func(_ received, _ int) int { return code }, func(w http.ResponseWriter) http.ResponseWriter {
				w.Header().Set("Location", target.url())
				return w
			})
			h := start(t, Config{Webhooks: []Webhook{fast(Webhook{Name: "w", URL: rc.url()})}})
			h.publish(t, "Deployed", 0, 1)
			waitFor(t, 10*time.Second, "failed", func() bool { return h.status(t, "w").Failed == 1 })
			time.Sleep(100 * time.Millisecond)
			if rc.count() != 1 || target.count() != 0 {
				t.Fatalf("%d attempts, redirect target got %d", rc.count(), target.count())
			}
			var ds struct{ Deliveries []Delivery }
			h.api(t, "GET", "/api/webhooks/w/deliveries?status=failed", &ds)
			if len(ds.Deliveries) != 1 || len(ds.Deliveries[0].Attempts) != 1 || ds.Deliveries[0].Attempts[0].StatusCode != code {
				t.Fatalf("deliveries %+v", ds.Deliveries)
			}
		})
	}
}

// A receiver that hangs: the attempt ends at the per-attempt timeout, then
// a retry succeeds.
//
// Guards: bound webhooks[].timeout (docs/bounds.md).
func TestHangingReceiverTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	rc := newReceiver(t, "", func(_ received, seen int) int {
		if seen == 1 {
			return -1
		}
		return http.StatusOK
	})
	h := start(t, Config{Webhooks: []Webhook{{Name: "w", URL: rc.url(), Timeout: timeout, BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond}}})
	h.publish(t, "Deployed", 0, 1)
	waitFor(t, 10*time.Second, "delivered", func() bool { return h.status(t, "w").Delivered == 1 })
	reqs := rc.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d attempts", len(reqs))
	}
	// The receiver stamps arrival after reading the body, a little after
	// the client started the attempt's clock: allow that much early.
	if gap := reqs[1].at.Sub(reqs[0].at); gap < timeout*8/10 || gap > timeout+time.Second {
		t.Fatalf("retry %s after the first attempt, want the timeout %s plus a short backoff", gap, timeout)
	}
	var ds struct{ Deliveries []Delivery }
	h.api(t, "GET", "/api/webhooks/w/deliveries", &ds)
	a := ds.Deliveries[0].Attempts
	if len(a) != 2 || a[0].Error != "timeout after 300ms" || a[0].StatusCode != 0 || a[0].LatencyMS < 290 {
		t.Fatalf("attempts %+v", a)
	}
}

// A delivery that exhausts its attempts is dead-lettered; retried through
// the API, it arrives with its original delivery_id. Retrying it again
// (now delivered) is a conflict; unknown ids and webhooks are 404.
//
// Guards: bound webhooks[].max_attempts (docs/bounds.md).
func TestDeadLetterRetriedThroughAPI(t *testing.T) {
	var up bool
	var rc *receiver
	rc = newReceiver(t, "k", func(_ received, _ int) int {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if up {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	})
	h := start(t, Config{Webhooks: []Webhook{fast(Webhook{Name: "w", URL: rc.url(), Secret: "k", MaxAttempts: 3})}})
	h.publish(t, "Deployed", 0, 1)
	waitFor(t, 10*time.Second, "dead-lettered", func() bool { return h.status(t, "w").DeadLettered == 1 })
	var ds struct{ Deliveries []Delivery }
	h.api(t, "GET", "/api/webhooks/w/deliveries?status=dead_lettered", &ds)
	if len(ds.Deliveries) != 1 || len(ds.Deliveries[0].Attempts) != 3 || ds.Deliveries[0].Attempts[2].StatusCode != 500 {
		t.Fatalf("dead letters %+v", ds.Deliveries)
	}
	id := ds.Deliveries[0].ID
	var list listResponse
	h.api(t, "GET", "/api/webhooks", &list)
	if w := list.Webhooks[0]; w.DeadLetters != 1 || w.Failed != 1 || !strings.Contains(w.LastError, "HTTP 500") {
		t.Fatalf("list %+v", w)
	}

	rc.mu.Lock()
	up = true
	rc.mu.Unlock()
	var errBody struct {
		Error struct{ Code, Message string }
	}
	if code := h.api(t, "POST", "/api/webhooks/w/deliveries/nope/retry", &errBody); code != 404 || errBody.Error.Code != "delivery_not_found" {
		t.Fatalf("unknown delivery: %d %+v", code, errBody)
	}
	if code := h.api(t, "POST", "/api/webhooks/nope/deliveries/"+id+"/retry", &errBody); code != 404 || errBody.Error.Code != "webhook_not_found" {
		t.Fatalf("unknown webhook: %d %+v", code, errBody)
	}
	var retried struct{ Delivery Delivery }
	if code := h.api(t, "POST", "/api/webhooks/w/deliveries/"+id+"/retry", &retried); code != http.StatusAccepted || retried.Delivery.ID != id {
		t.Fatalf("retry: %d %+v", code, retried)
	}
	waitFor(t, 10*time.Second, "redelivered", func() bool { return h.status(t, "w").Delivered == 1 })
	reqs := rc.requests()
	last := reqs[len(reqs)-1]
	if len(reqs) != 4 || last.msg.DeliveryID != id || last.header.Get(HeaderDelivery) != id || last.header.Get("webhook-id") != id {
		t.Fatalf("%d requests, last with delivery_id %s, want %s", len(reqs), last.msg.DeliveryID, id)
	}
	if string(last.body) != string(reqs[0].body) {
		t.Fatal("the retried body differs from the original")
	}
	if code := h.api(t, "POST", "/api/webhooks/w/deliveries/"+id+"/retry", &errBody); code != http.StatusConflict || errBody.Error.Code != "not_retryable" {
		t.Fatalf("retry of a delivered one: %d %+v", code, errBody)
	}
	if code := h.api(t, "GET", "/api/webhooks/w/deliveries?status=bogus", &errBody); code != 400 {
		t.Fatalf("bad status filter: %d", code)
	}
	if code := h.api(t, "GET", "/api/webhooks/nope/deliveries", &errBody); code != 404 {
		t.Fatalf("unknown webhook: %d", code)
	}
}

func TestNotStartedAnswers503(t *testing.T) {
	m, err := New(Config{Webhooks: []Webhook{{Name: "w", URL: "http://127.0.0.1:1/"}}})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{mod: m}
	var body struct {
		Error struct{ Code, Message string }
	}
	if code := h.api(t, "GET", "/api/webhooks", &body); code != 503 || body.Error.Code != "not_started" ||
		body.Error.Message != "egress: module not started: pass it to Engine.Use" {
		t.Fatalf("%d %+v", code, body)
	}
}

// Attempts are listed newest first and statuses filter.
func TestDeliveriesListing(t *testing.T) {
	rc := newReceiver(t, "", nil)
	h := start(t, Config{Webhooks: []Webhook{fast(Webhook{Name: "w", URL: rc.url()})}})
	h.publish(t, "Deployed", 0, 5)
	waitFor(t, 10*time.Second, "delivered", func() bool { return h.status(t, "w").Delivered == 5 })
	var ds struct{ Deliveries []Delivery }
	h.api(t, "GET", "/api/webhooks/w/deliveries?limit=3", &ds)
	if len(ds.Deliveries) != 3 || !slices.IsSortedFunc(ds.Deliveries, func(a, b Delivery) int { return strings.Compare(b.ID, a.ID) }) {
		t.Fatalf("%+v", ds.Deliveries)
	}
	h.api(t, "GET", "/api/webhooks/w/deliveries?status=queued", &ds)
	if len(ds.Deliveries) != 0 {
		t.Fatalf("queued: %+v", ds.Deliveries)
	}
}

// Stop before Start is a no-op; after Stop the module cannot start again,
// the API still lists, and a retry answers 503.
func TestLifecycle(t *testing.T) {
	m, err := New(Config{Webhooks: []Webhook{fast(Webhook{Name: "w", URL: "http://127.0.0.1:1/"})}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t, "", func(received, int) int { return http.StatusBadRequest })
	h := start(t, Config{Webhooks: []Webhook{fast(Webhook{Name: "w", URL: rc.url()})}})
	h.publish(t, "Deployed", 0, 1)
	waitFor(t, 10*time.Second, "failed", func() bool { return h.status(t, "w").Failed == 1 })
	var ds struct{ Deliveries []Delivery }
	h.api(t, "GET", "/api/webhooks/w/deliveries?status=failed", &ds)
	h.close(t)
	if err := h.mod.Start(t.Context(), h.eng); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}
	var list listResponse
	if code := h.api(t, "GET", "/api/webhooks", &list); code != 200 || len(list.Webhooks) != 1 {
		t.Fatalf("list after stop: %d %+v", code, list)
	}
	var body struct {
		Error struct{ Code, Message string }
	}
	if code := h.api(t, "POST", "/api/webhooks/w/deliveries/"+ds.Deliveries[0].ID+"/retry", &body); code != 503 || body.Error.Code != "not_running" {
		t.Fatalf("retry after stop: %d %+v", code, body)
	}
}

// DeliveriesOf finds the deliveries of given events across webhooks, each
// with its attempts, oldest first, bounded; other events' are left out, and
// a webhook with no filter has none for a telemetry event (a model call's
// ModelResult).
func TestDeliveriesOf(t *testing.T) {
	ok := newReceiver(t, "", nil)
	refused := newReceiver(t, "", func(received, int) int { return http.StatusBadRequest })
	h := start(t, Config{Webhooks: []Webhook{fast(Webhook{Name: "ok", URL: ok.url()}), fast(Webhook{Name: "refused", URL: refused.url()})}})
	var ids []string
	for i, typ := range []string{"Deployed", "Deployed", axocoatl.EventModelResult, "Deployed"} {
		ev, err := lattice.New(typ, "test", map[string]int{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		ev.Class = h.eng.ClassOf(typ)
		if err := h.eng.Bus().Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	waitFor(t, 10*time.Second, "delivered and refused", func() bool {
		return h.status(t, "ok").Delivered == 3 && h.status(t, "refused").Failed == 3
	})
	got := h.mod.DeliveriesOf([]string{ids[0], ids[2], ids[3], "unknown"}, 0)
	if len(got) != 4 || !slices.IsSortedFunc(got, func(a, b Delivery) int { return strings.Compare(a.ID, b.ID) }) {
		t.Fatalf("%d deliveries, want 4 oldest first: %+v", len(got), got)
	}
	for _, d := range got {
		if d.EventID != ids[0] && d.EventID != ids[3] {
			t.Errorf("delivery of event %s (%s), not asked for", d.EventID, d.EventType)
		}
		want := map[string]Status{"ok": StatusDelivered, "refused": StatusFailed}[d.Webhook]
		if d.Status != want || len(d.Attempts) != 1 || d.Attempts[0].StatusCode == 0 {
			t.Errorf("%s: %s with %+v, want %s after one attempt", d.Webhook, d.Status, d.Attempts, want)
		}
	}
	if got := h.mod.DeliveriesOf(ids, 2); len(got) != 2 {
		t.Errorf("limit 2: %d deliveries", len(got))
	}
	if got := h.mod.DeliveriesOf(nil, 0); got != nil {
		t.Errorf("no events: %+v", got)
	}
}
