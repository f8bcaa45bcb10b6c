package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/secret"
)

// failingTransport fails every request and counts them.
type failingTransport struct{ calls atomic.Int64 }

func (f *failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	f.calls.Add(1)
	return nil, errors.New("no request may be sent")
}

// With no webhooks, Start starts nothing: no goroutine, no store file, and
// not one request, whatever is published.
func TestNoWebhooksNoEgress(t *testing.T) {
	ft := &failingTransport{}
	dir := t.TempDir()
	eng := axocoatl.New(axocoatl.Options{})
	defer eng.Close(context.Background())
	before := goleak.IgnoreCurrent()
	m, err := New(Config{DataDir: dir, Transport: ft})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{axocoatl.EventTaskCompleted, axocoatl.EventAgentFailed, axocoatl.EventToolCalled, "Deployed"} {
		for i := range 100 {
			if err := eng.Publish(context.Background(), typ, "test", map[string]int{"n": i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("Start with no webhooks left goroutines: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := ft.calls.Load(); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("data dir touched: %v", entries)
	}
	h := &harness{mod: m}
	var list listResponse
	if code := h.api(t, "GET", "/api/webhooks", &list); code != 200 || len(list.Webhooks) != 0 {
		t.Fatalf("%d %+v", code, list)
	}
	if err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Chaos: 5,000 events to a receiver failing at random (30% 503, 5% 429,
// 3% connection reset after reading the request, so some events arrive
// twice): every event arrives, and all copies of one share a delivery_id.
func TestChaosEveryEventAtLeastOnce(t *testing.T) {
	const n = 5000
	var resets, fails atomic.Int64
	rc := newReceiverWrapped(t, "chaos", func(_ received, _ int) int {
		switch p := rand.IntN(100); {
		case p < 30:
			fails.Add(1)
			return http.StatusServiceUnavailable
		case p < 35:
			fails.Add(1)
			return http.StatusTooManyRequests
		case p < 38:
			resets.Add(1)
			return 0
		}
		return http.StatusOK
	}, func(w http.ResponseWriter) http.ResponseWriter {
		w.Header().Set("Retry-After", "0")
		return w
	})
	h := start(t, Config{Webhooks: []Webhook{{Name: "w", URL: rc.url(), Secret: "chaos", MaxAttempts: 40,
		BackoffBase: time.Millisecond, BackoffMax: 10 * time.Millisecond}}})
	h.publish(t, "Deployed", 0, n)
	waitFor(t, 180*time.Second, "every event delivered", func() bool { return h.status(t, "w").Delivered == n })
	events := eventsOf(rc.requests())
	if len(events) != n {
		t.Fatalf("%d distinct events arrived, want %d", len(events), n)
	}
	for ev, ids := range events {
		if len(ids) != 1 {
			t.Fatalf("event %s arrived under %d delivery ids", ev, len(ids))
		}
	}
	st := h.status(t, "w")
	t.Logf("%d requests: %d refused, %d reset; status %+v", rc.count(), fails.Load(), resets.Load(), st)
	if resets.Load() == 0 || fails.Load() == 0 || st.Failed != 0 || st.Dropped != 0 {
		t.Fatalf("chaos did not happen or something failed: %+v", st)
	}
}

// Flood: 200,000 events at an endpoint that never answers. Its queue holds
// QueueSize, Concurrency are in flight, every other delivery is dropped and
// counted exactly (status, metric, log lines); memory and goroutines stay
// bounded; a second, healthy webhook gets every one of its events.
//
// Guards: bound webhooks[].queue_size, bound webhooks[].concurrency (docs/bounds.md).
func TestFloodBoundedAndCounted(t *testing.T) {
	const total, every = 200000, 20
	stuck := newReceiver(t, "", func(_ received, _ int) int { return -1 })
	// The healthy receiver only counts distinct events (the full receiver
	// keeps every request, which would weigh on the heap measured here).
	var healthyMu sync.Mutex
	healthySeen := map[string]bool{}
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg wireMsg
		if err := json.NewDecoder(r.Body).Decode(&msg); err != nil || msg.EventType != "Ping" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		healthyMu.Lock()
		healthySeen[msg.EventID] = true
		healthyMu.Unlock()
	}))
	defer healthy.Close()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapInuse
	h := start(t, Config{Webhooks: []Webhook{
		{Name: "stuck", URL: stuck.url(), Timeout: time.Minute},
		{Name: "healthy", URL: healthy.URL, Events: []string{"Ping"}, QueueSize: total / every},
	}})
	goroutinesMax := 0
	began := time.Now()
	for sent := 0; sent < total; {
		for range 10000 {
			typ := "Flood"
			if sent%every == 0 {
				typ = "Ping"
			}
			if err := h.eng.Publish(context.Background(), typ, "test", map[string]int{"n": sent}); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		// Pace the publisher by what egress took (not by deliveries):
		// the lattice buffer is not what this test measures.
		waitFor(t, 60*time.Second, "ingest", func() bool {
			s := h.status(t, "stuck")
			return s.Queued+s.InFlight+int(s.Dropped) == sent
		})
		goroutinesMax = max(goroutinesMax, runtime.NumGoroutine())
	}
	t.Logf("published and queued in %s", time.Since(began))
	waitFor(t, 180*time.Second, "healthy delivered", func() bool { return h.status(t, "healthy").Delivered == total/every })
	t.Logf("healthy delivered all after %s", time.Since(began))
	s := h.status(t, "stuck")
	want := uint64(total - DefaultQueueSize - DefaultConcurrency)
	if s.Queued != DefaultQueueSize || s.InFlight != DefaultConcurrency || s.Dropped != want || h.mod.Missed() != 0 {
		t.Fatalf("stuck: queued %d, in flight %d, dropped %d (want %d), lattice missed %d", s.Queued, s.InFlight, s.Dropped, want, h.mod.Missed())
	}
	if got := testutil.ToFloat64(h.mod.metrics.dropped.WithLabelValues("stuck")); got != float64(want) {
		t.Fatalf("metric says %v dropped", got)
	}
	healthyMu.Lock()
	got := len(healthySeen)
	healthyMu.Unlock()
	if hs := h.status(t, "healthy"); hs.Dropped != 0 || got != total/every {
		t.Fatalf("healthy: %+v, received %d distinct events", hs, got)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grew := int64(ms.HeapInuse) - int64(heapBefore)
	t.Logf("heap grew %d MiB, goroutines at most %d", grew>>20, goroutinesMax)
	if grew > 64<<20 || goroutinesMax > 400 {
		t.Fatalf("not bounded: heap grew %d MiB, %d goroutines", grew>>20, goroutinesMax)
	}
	// The log lines' counts add up to the total once the module stops.
	h.close(t)
	var logged uint64
	for line := range strings.Lines(h.logs.String()) {
		var rec struct {
			Msg     string
			Webhook string
			Dropped uint64
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "webhook queue full: deliveries dropped" {
			if rec.Webhook != "stuck" {
				t.Fatalf("drop logged for %s", rec.Webhook)
			}
			logged += rec.Dropped
		}
	}
	if logged != want {
		t.Fatalf("log lines count %d dropped, want %d", logged, want)
	}
}

// Deliveries outlive a graceful restart: published while the receiver is
// down, they arrive after the next start with their delivery_ids.
func TestRestartKeepsDeliveries(t *testing.T) {
	const n = 200
	dir := t.TempDir()
	var down atomic.Bool
	down.Store(true)
	rc := newReceiver(t, "s", func(_ received, _ int) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	cfg := Config{DataDir: dir, Webhooks: []Webhook{{Name: "w", URL: rc.url(), Secret: "s", MaxAttempts: 1000, Concurrency: n,
		BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond}}}
	h := start(t, cfg)
	h.publish(t, "Deployed", 0, n)
	waitFor(t, 10*time.Second, "every delivery attempted", func() bool { return len(eventsOf(rc.requests())) == n })
	waitFor(t, 10*time.Second, "an attempt recorded for every delivery", func() bool {
		var ds struct{ Deliveries []Delivery }
		h.api(t, "GET", "/api/webhooks/w/deliveries?limit=1000", &ds)
		for _, d := range ds.Deliveries {
			if len(d.Attempts) == 0 {
				return false
			}
		}
		return len(ds.Deliveries) == n
	})
	h.close(t)
	before := rc.byDelivery()

	down.Store(false)
	h2 := start(t, cfg)
	waitFor(t, 20*time.Second, "delivered after restart", func() bool { return h2.status(t, "w").Delivered == n })
	events := eventsOf(rc.requests())
	if len(events) != n {
		t.Fatalf("%d events arrived, want %d", len(events), n)
	}
	for ev, ids := range events {
		if len(ids) != 1 {
			t.Fatalf("event %s under %d delivery ids", ev, len(ids))
		}
	}
	for id := range rc.byDelivery() {
		if before[id] == nil {
			t.Fatalf("delivery %s is new after the restart", id)
		}
	}
	// The attempts made before the restart are kept.
	var ds struct{ Deliveries []Delivery }
	h2.api(t, "GET", "/api/webhooks/w/deliveries?status=delivered&limit=1000", &ds)
	kept := 0
	for _, d := range ds.Deliveries {
		if a := d.Attempts; len(a) >= 2 && a[0].StatusCode == 503 && a[len(a)-1].StatusCode == 200 {
			kept++
		}
	}
	if len(ds.Deliveries) != recentDelivered || kept != recentDelivered {
		t.Fatalf("%d of the %d listed deliveries kept their attempts from before the restart", kept, len(ds.Deliveries))
	}
	h2.close(t)
	// Nothing is left pending in the store.
	h3 := start(t, cfg)
	if s := h3.status(t, "w"); s.Queued != 0 || s.DeadLetters != 0 {
		t.Fatalf("left in the store: %+v", s)
	}
	if _, err := os.Stat(filepath.Join(dir, DBFile)); err != nil {
		t.Fatal(err)
	}
}

// Secrets, header values and the URL's query reach no log line (at debug
// level), no error, no API answer, no metric and no description.
func TestSecretsAppearNowhere(t *testing.T) {
	const sec, hdr, query = "sec-VALUE-9f8e7d", "hdr-VALUE-1a2b3c", "qry-VALUE-4d5e6f"
	rc := newReceiver(t, sec, func(r received, _ int) int {
		if r.header.Get("Authorization") != "Bearer "+hdr {
			return http.StatusUnauthorized
		}
		return http.StatusBadRequest
	})
	cfg := Config{Webhooks: []Webhook{
		fast(Webhook{Name: "bad", URL: rc.url() + "?token=" + query, Secret: sec, Headers: map[string]secret.Secret{"Authorization": "Bearer " + hdr}}),
		// Nothing listens on port 1: connection errors name the URL in Go.
		fast(Webhook{Name: "down", URL: "http://127.0.0.1:1/x?token=" + query, Secret: sec, MaxAttempts: 2,
			Headers: map[string]secret.Secret{"X-Key": hdr}}),
	}}
	h := start(t, cfg)
	h.publish(t, "Deployed", 0, 3)
	waitFor(t, 10*time.Second, "failures", func() bool {
		return h.status(t, "bad").Failed == 3 && h.status(t, "down").Failed == 3
	})
	var out strings.Builder
	for _, path := range []string{"/api/webhooks", "/api/webhooks/bad/deliveries", "/api/webhooks/down/deliveries"} {
		var v any
		h.api(t, "GET", path, &v)
		b, _ := json.Marshal(v)
		out.Write(b)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(h.mod.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(&out, mfs)
	fmt.Fprintf(&out, "%v %+v %#v %s", cfg, cfg, cfg, cfg.Webhooks)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("config", "webhook", cfg.Webhooks[0], "all", cfg)
	slog.New(slog.NewTextHandler(&out, nil)).Info("config", "webhook", cfg.Webhooks[0], "all", cfg)
	js, _ := json.Marshal(cfg)
	out.Write(js)
	b, _ := json.Marshal(cfg.Describe())
	out.Write(b)
	bad := cfg
	bad.Webhooks = []Webhook{{Name: "x", URL: "gopher://h/?t=" + query, Secret: sec}}
	_, err = New(bad)
	fmt.Fprint(&out, err)
	h.close(t)
	out.WriteString(h.logs.String())
	if !strings.Contains(out.String(), "HTTP 400") || !strings.Contains(out.String(), "connection refused") {
		t.Fatalf("the failures were not reported at all:\n%s", out.String())
	}
	for _, leak := range []string{sec, hdr, query} {
		if i := strings.Index(out.String(), leak); i >= 0 {
			t.Fatalf("%q leaked: …%s…", leak, out.String()[max(i-200, 0):min(i+100, out.Len())])
		}
	}
}

// missBus reports extra losses on its subscriptions, as a lattice that
// dropped events for a starved subscriber would.
type missBus struct {
	lattice.Bus
	extra *atomic.Uint64
}

func (b missBus) Subscribe(f lattice.Filter, n int) (lattice.Subscription, error) {
	s, err := b.Bus.Subscribe(f, n)
	if err != nil {
		return nil, err
	}
	return missSub{s, b.extra}, nil
}

type missSub struct {
	lattice.Subscription
	extra *atomic.Uint64
}

func (s missSub) Missed() uint64 { return s.Subscription.Missed() + s.extra.Load() }

// Events the lattice dropped before egress took them are counted and
// logged with their number, not silently lost.
//
// Guards: bound "events buffered between the lattice and the queues" (webhooks) (docs/bounds.md).
func TestLatticeLossesCounted(t *testing.T) {
	var extra atomic.Uint64
	bus := lattice.NewMemory()
	defer bus.Close()
	var logs strings.Builder
	var mu sync.Mutex
	eng := axocoatl.New(axocoatl.Options{Bus: missBus{bus, &extra}, Logger: slogTo(&mu, &logs)})
	rc := newReceiver(t, "", nil)
	m, err := New(Config{Webhooks: []Webhook{fast(Webhook{Name: "w", URL: rc.url()})}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	extra.Store(7)
	if err := eng.Publish(context.Background(), "Deployed", "test", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "missed counted", func() bool { return m.Missed() == 7 })
	h := &harness{mod: m}
	var list listResponse
	h.api(t, "GET", "/api/webhooks", &list)
	if list.Missed != 7 {
		t.Fatalf("API missed %d", list.Missed)
	}
	if got := testutil.ToFloat64(m.metrics.missed); got != 7 {
		t.Fatalf("metric %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), `"lost":7`) {
		t.Fatalf("no log line with the count:\n%s", logs.String())
	}
}

// Dead letters are bounded: beyond MaxDeadLetters the oldest go, counted.
//
// Guards: bound webhooks[].max_dead_letters (docs/bounds.md).
func TestDeadLettersBounded(t *testing.T) {
	rc := newReceiver(t, "", func(received, int) int { return http.StatusGone })
	h := start(t, Config{Webhooks: []Webhook{fast(Webhook{Name: "w", URL: rc.url(), MaxDeadLetters: 2, Concurrency: 1})}})
	h.publish(t, "Deployed", 0, 5)
	waitFor(t, 10*time.Second, "failures", func() bool { return h.status(t, "w").Failed == 5 })
	s := h.status(t, "w")
	var ds struct{ Deliveries []Delivery }
	h.api(t, "GET", "/api/webhooks/w/deliveries?status=failed", &ds)
	if s.DeadLetters != 2 || s.Evicted != 3 || len(ds.Deliveries) != 2 {
		t.Fatalf("status %+v, listed %d", s, len(ds.Deliveries))
	}
	// The two kept are the newest.
	var newest []string
	for _, r := range rc.requests()[3:] {
		newest = append(newest, r.msg.DeliveryID)
	}
	for _, d := range ds.Deliveries {
		if !slices.Contains(newest, d.ID) {
			t.Fatalf("kept %s, not one of the newest %v", d.ID, newest)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func slogTo(mu *sync.Mutex, w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(lockedWriter{mu, w}, nil))
}

// Deliveries stored for a webhook that was removed from the config are
// kept, not sent, and reported at start.
func TestRemovedWebhookReported(t *testing.T) {
	dir := t.TempDir()
	rc := newReceiver(t, "", func(received, int) int { return http.StatusServiceUnavailable })
	h := start(t, Config{DataDir: dir, Webhooks: []Webhook{{Name: "old", URL: rc.url(), MaxAttempts: 1000,
		BackoffBase: 50 * time.Millisecond, BackoffMax: 100 * time.Millisecond, Concurrency: 1}}})
	h.publish(t, "Deployed", 0, 3)
	waitFor(t, 10*time.Second, "stored", func() bool { s := h.status(t, "old"); return s.Queued+s.InFlight == 3 })
	h.close(t)
	other := newReceiver(t, "", nil)
	h2 := start(t, Config{DataDir: dir, Webhooks: []Webhook{fast(Webhook{Name: "new", URL: other.url()})}})
	if !strings.Contains(h2.logs.String(), `"msg":"webhook store holds deliveries of a webhook that is not configured: kept, not sent","module":"egress","webhook":"old","deliveries":3}`) {
		t.Fatalf("not reported:\n%s", h2.logs.String())
	}
	if other.count() != 0 {
		t.Fatal("another webhook's deliveries were sent")
	}
}
