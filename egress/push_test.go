package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/secret"
)

const testPushSecret = "push-secret-for-tests"

// pushReceiver records push requests; while down it answers 503.
type pushReceiver struct {
	srv  *httptest.Server
	got  chan received
	down atomic.Bool
	hits atomic.Int64
}

func newPushReceiver(t testing.TB) *pushReceiver {
	rc := &pushReceiver{got: make(chan received, 64)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		if rc.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rc.got <- received{header: r.Header.Clone(), body: b}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *pushReceiver) next(t testing.TB) received {
	t.Helper()
	select {
	case r := <-rc.got:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no push request within 30s")
	}
	return received{}
}

func pushConfig() Config {
	return Config{Push: Push{Enabled: true, Secret: testPushSecret, BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		Timeout: 5 * time.Second}}
}

func pushDelivery(t testing.TB, h *harness, id string) Delivery {
	t.Helper()
	ds, err := h.mod.Deliveries(PushWebhook, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.ID == id {
			return d
		}
	}
	t.Fatalf("no push delivery %s", id)
	return Delivery{}
}

// A push request is POSTed as given (the exact body, the caller's
// headers), signed with the push secret; the Engine hands the module out
// as its Pusher.
func TestPushDelivers(t *testing.T) {
	rc := newPushReceiver(t) // closed after the module
	h := start(t, pushConfig())
	p, ok := h.eng.Pusher()
	if !ok || p != axocoatl.Pusher(h.mod) {
		t.Fatalf("Engine.Pusher() = %v, %v: want the egress module", p, ok)
	}
	body := []byte(`{"task":{"id":"t1"}}`)
	id, err := p.Push(context.Background(), axocoatl.PushRequest{URL: rc.srv.URL + "/cb", Body: body, EventType: "a2a.PushNotification",
		Subject: "t1", AllowPrivate: true, Header: map[string]secret.Secret{"authorization": "Bearer tok"}})
	if err != nil {
		t.Fatal(err)
	}
	r := rc.next(t)
	if string(r.body) != string(body) {
		t.Fatalf("body %s, want %s", r.body, body)
	}
	if r.header.Get("Authorization") != "Bearer tok" || r.header.Get(HeaderDelivery) != id || r.header.Get(HeaderEvent) != "a2a.PushNotification" {
		t.Fatalf("headers %v", r.header)
	}
	if err := Verify(testPushSecret, r.header, r.body, 0); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	waitFor(t, 10*time.Second, "delivered", func() bool { return pushDelivery(t, h, id).Status == StatusDelivered })
	if d := pushDelivery(t, h, id); d.EventID != "t1" {
		t.Fatalf("delivery %+v: event_id should be the subject", d)
	}
	if strings.Contains(h.logs.String(), "Bearer tok") {
		t.Fatal("a push header value is in the logs")
	}
}

// Without AllowPrivate the guard refuses the address dialed: a loopback
// IP, and a name that resolves to one when dialed (localhost: the check is
// on the address connected to, not on the name). Nothing reaches the
// receiver, the delivery fails at once (not retried) saying why.
func TestPushGuardRefusesDialedAddress(t *testing.T) {
	rc := newPushReceiver(t)
	h := start(t, pushConfig())
	u, _ := url.Parse(rc.srv.URL)
	_, port, _ := net.SplitHostPort(u.Host)
	targets := []string{rc.srv.URL, "http://localhost:" + port}
	if host, err := os.Hostname(); err == nil {
		if addrs, err := net.LookupHost(host); err == nil && len(addrs) > 0 && net.ParseIP(addrs[0]).IsLoopback() {
			targets = append(targets, "http://"+host+":"+port) // the machine's own name, resolving to loopback
		}
	}
	for _, target := range targets {
		id, err := h.mod.Push(context.Background(), axocoatl.PushRequest{URL: target, Body: []byte(`{}`), Subject: "t"})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "failed "+target, func() bool { return pushDelivery(t, h, id).Status == StatusFailed })
		d := pushDelivery(t, h, id)
		if len(d.Attempts) != 1 || !strings.Contains(d.LastError, "refused") || !strings.Contains(d.LastError, "loopback") {
			t.Fatalf("%s: %+v, want one attempt refused as loopback", target, d)
		}
	}
	if n := rc.hits.Load(); n != 0 {
		t.Fatalf("the receiver got %d requests through the guard", n)
	}
}

// A push request egress would not send is refused when queued.
func TestPushRefusesBadRequests(t *testing.T) {
	h := start(t, pushConfig())
	for _, p := range []axocoatl.PushRequest{
		{URL: "ftp://example.com/", Body: []byte(`{}`)},
		{URL: "https://example.com/", Body: []byte(`{}`), Header: map[string]secret.Secret{"webhook-signature": "v1,forged"}},
		{URL: "https://example.com/", Body: []byte(`{}`), Header: map[string]secret.Secret{"Authorization": "a\r\nb"}},
		{URL: "https://example.com/"},
	} {
		if _, err := h.mod.Push(context.Background(), p); !errors.Is(err, ErrPushRefused) {
			t.Fatalf("%+v: %v, want ErrPushRefused", p.URL, err)
		}
	}
	off := start(t, Config{})
	if _, ok := off.eng.Pusher(); ok {
		t.Fatal("Engine.Pusher() found one without push enabled")
	}
	if _, err := off.mod.Push(context.Background(), axocoatl.PushRequest{URL: "https://example.com/", Body: []byte(`{}`)}); !errors.Is(err, axocoatl.ErrPushUnavailable) {
		t.Fatalf("push disabled: %v", err)
	}
	if err := (Config{Push: Push{Enabled: true}, Webhooks: []Webhook{{Name: PushWebhook, URL: "https://example.com/"}}}).Validate(); err == nil {
		t.Fatal("a webhook named a2a-push beside push delivery validated")
	}
}

// Guards: bound "push delivery queue" (egress) (docs/bounds.md).
func TestPushQueueBound(t *testing.T) {
	cfg := pushConfig()
	cfg.Push.QueueSize, cfg.Push.Concurrency, cfg.Push.MaxAttempts = 2, 1, 1000
	rc := newPushReceiver(t)
	h := start(t, cfg)
	rc.down.Store(true)
	p := axocoatl.PushRequest{URL: rc.srv.URL, Body: []byte(`{}`), AllowPrivate: true}
	// One in flight (retrying), two waiting; the next is refused.
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		_, err = h.mod.Push(context.Background(), p)
	}
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("push past the queue: %v, want ErrQueueFull", err)
	}
	rc.down.Store(false)
}

// With a data dir a push delivery outlives the process: queued while the
// receiver is down, sent after a restart with its URL and headers.
func TestPushSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := pushConfig()
	cfg.DataDir = dir
	cfg.Push.MaxAttempts = 1000
	rc := newPushReceiver(t)
	rc.down.Store(true)
	h := start(t, cfg)
	id, err := h.mod.Push(context.Background(), axocoatl.PushRequest{URL: rc.srv.URL, Body: []byte(`{"n":1}`), AllowPrivate: true,
		Header: map[string]secret.Secret{"Authorization": "Bearer kept"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a failed attempt", func() bool { return rc.hits.Load() > 0 })
	h.close(t)
	rc.down.Store(false)
	h2 := start(t, cfg)
	r := rc.next(t)
	if r.header.Get(HeaderDelivery) != id || r.header.Get("Authorization") != "Bearer kept" || string(r.body) != `{"n":1}` {
		t.Fatalf("after restart: %v %s", r.header, r.body)
	}
	if err := Verify(testPushSecret, r.header, r.body, 0); err != nil {
		t.Fatal(err)
	}
	_ = h2
}
