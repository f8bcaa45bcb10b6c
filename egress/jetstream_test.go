package egress

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/clustersig"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// jsServer starts an embedded nats-server with JetStream on a temp dir.
func jsServer(t testing.TB) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{DontListen: true, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

// jsNode is one process's Engine on the NATS lattice with egress on
// JetStream.
func jsNode(t testing.TB, ns *server.Server, node string, hooks ...Webhook) *harness {
	t.Helper()
	bus, err := latticenats.Connect("", latticenats.Options{Node: node}, natsgo.InProcessServer(ns), natsgo.Name(node))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	eng := axocoatl.New(axocoatl.Options{Bus: bus, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	m, err := New(Config{Webhooks: hooks, JetStream: &JetStream{Conn: bus.Conn(), Prefix: bus.Prefix(), AckWait: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	h := &harness{eng: eng, mod: m, logs: logs}
	t.Cleanup(func() { h.close(t); _ = bus.Close() })
	return h
}

// Two processes on one NATS, each publishing its own events: every event
// is delivered once, under one delivery_id, by one of them; a failure is
// dead-lettered in JetStream, listed and retried through the other
// process's API.
func TestJetStreamSharedQueue(t *testing.T) {
	ns := jsServer(t)
	const n = 200
	var fixed atomic.Bool
	rc := newReceiver(t, "js", func(r received, _ int) int {
		if r.msg.EventType == "Broken" && !fixed.Load() {
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	w := fast(Webhook{Name: "w", URL: rc.url(), Secret: "js", Events: []string{"Deployed", "Broken"}})
	a := jsNode(t, ns, "a", w)
	b := jsNode(t, ns, "b", w)
	a.publish(t, "Deployed", 0, n)
	b.publish(t, "Deployed", n, n)
	waitFor(t, 20*time.Second, "every event accepted", func() bool { return len(rc.accepted()) == 2*n })
	for ev, ids := range eventsOf(rc.requests()) {
		if len(ids) != 1 {
			t.Fatalf("event %s arrived under %d delivery ids", ev, len(ids))
		}
	}
	if got := rc.count(); got != 2*n {
		t.Fatalf("%d requests for %d events", got, 2*n)
	}
	// The receiver answers before the sender counts: wait for the count.
	waitFor(t, 5*time.Second, "every delivery counted", func() bool {
		return a.status(t, "w").Delivered+b.status(t, "w").Delivered == 2*n
	})
	if sa, sb := a.status(t, "w"), b.status(t, "w"); sa.Store != "jetstream" || sa.Delivered == 0 || sb.Delivered == 0 {
		t.Fatalf("status a %+v b %+v: want both to deliver", sa, sb)
	}

	a.publish(t, "Broken", 0, 1)
	waitFor(t, 10*time.Second, "a dead letter", func() bool { return b.status(t, "w").DeadLetters == 1 })
	var list struct{ Deliveries []Delivery }
	if code := b.api(t, "GET", "/api/webhooks/w/deliveries?status=failed", &list); code != 200 || len(list.Deliveries) != 1 {
		t.Fatalf("failed deliveries on b: %d %+v", code, list)
	}
	id := list.Deliveries[0].ID
	fixed.Store(true)
	if code := b.api(t, "POST", "/api/webhooks/w/deliveries/"+id+"/retry", nil); code != http.StatusAccepted {
		t.Fatalf("retry: %d", code)
	}
	waitFor(t, 10*time.Second, "the retried delivery accepted", func() bool { return len(rc.accepted()) == 2*n+1 })
	if got := rc.byDelivery()[id]; len(got) != 2 {
		t.Fatalf("delivery %s arrived %d times, want 2 (failed, retried)", id, len(got))
	}
	waitFor(t, 5*time.Second, "no dead letter", func() bool { return a.status(t, "w").DeadLetters == 0 })
	if code := a.api(t, "POST", "/api/webhooks/w/deliveries/"+id+"/retry", nil); code != http.StatusConflict && code != http.StatusNotFound {
		t.Fatalf("second retry: %d, want 404 or 409", code)
	}
}

// The API and the bounds on JetStream: a webhook's queue holds at most
// QueueSize deliveries for the whole cluster (more are dropped and
// counted), and any process reports the cluster's queue: b, which
// published nothing and sends nothing of it, sees what a queued and has in
// flight, and lists the queued deliveries.
func TestJetStreamClusterStateAndBound(t *testing.T) {
	ns := jsServer(t)
	rc := newReceiver(t, "", func(received, int) int { return -1 }) // hang
	w := Webhook{Name: "w", URL: rc.url(), Events: []string{"Deployed"}, QueueSize: 10, Concurrency: 1, Timeout: time.Minute}
	a := jsNode(t, ns, "a", w)
	a.publish(t, "Deployed", 0, 20)
	waitFor(t, 10*time.Second, "one delivery in flight", func() bool { return rc.count() == 1 })
	waitFor(t, 10*time.Second, "the overflow counted", func() bool { return a.status(t, "w").Dropped == 10 })
	b := jsNode(t, ns, "b", w)
	// b's sender takes the next delivery and hangs too; then 8 wait.
	waitFor(t, 10*time.Second, "b holding one", func() bool { return rc.count() == 2 })
	var list struct {
		Webhooks []WebhookStatus
	}
	if code := b.api(t, "GET", "/api/webhooks", &list); code != 200 || len(list.Webhooks) != 1 {
		t.Fatalf("GET /api/webhooks: %d %+v", code, list)
	}
	if s := list.Webhooks[0]; s.Store != "jetstream" || s.Queued != 8 || s.InFlight != 2 || s.ClusterError != "" {
		t.Fatalf("b's view of the cluster: %+v, want 8 queued and 2 in flight", s)
	}
	var ds struct{ Deliveries []Delivery }
	if code := b.api(t, "GET", "/api/webhooks/w/deliveries", &ds); code != 200 || len(ds.Deliveries) != 10 {
		t.Fatalf("b lists %d deliveries (%d), want the 10 in the queue", len(ds.Deliveries), code)
	}
	// The metrics say the same.
	want := `
# HELP axocoatl_webhook_in_flight Deliveries being sent or waiting between attempts.
# TYPE axocoatl_webhook_in_flight gauge
axocoatl_webhook_in_flight{webhook="w"} 2
# HELP axocoatl_webhook_queue_depth Deliveries waiting for a sender.
# TYPE axocoatl_webhook_queue_depth gauge
axocoatl_webhook_queue_depth{webhook="w"} 8
`
	if err := promtest.CollectAndCompare(b.mod.Collector(), strings.NewReader(want),
		"axocoatl_webhook_queue_depth", "axocoatl_webhook_in_flight"); err != nil {
		t.Fatal(err)
	}
	count := map[Status]int{}
	for _, d := range ds.Deliveries {
		count[d.Status]++
	}
	if count[StatusQueued] != 8 || count[StatusInFlight] != 2 {
		t.Fatalf("b lists %v, want 8 queued and 2 in flight", count)
	}
}

// A delivery that takes longer than AckWait stays with the process sending
// it: "in progress" acks renew the server's timer, so no other process
// sends it too.
func TestJetStreamLongDeliveryIsKept(t *testing.T) {
	ns := jsServer(t)
	var first, slowDone atomic.Bool
	rc := newReceiver(t, "", func(received, int) int {
		if first.CompareAndSwap(false, true) {
			time.Sleep(3500 * time.Millisecond) // beyond AckWait (2s here)
			slowDone.Store(true)
		}
		return http.StatusOK
	})
	w := fast(Webhook{Name: "w", URL: rc.url(), Events: []string{"Deployed"}, Timeout: 10 * time.Second})
	a := jsNode(t, ns, "a", w)
	jsNode(t, ns, "b", w)
	a.publish(t, "Deployed", 0, 1)
	// A request is recorded when answered: wait for the slow one.
	waitFor(t, 10*time.Second, "the slow delivery answered", slowDone.Load)
	time.Sleep(300 * time.Millisecond)
	if n := rc.count(); n != 1 {
		t.Fatalf("%d requests for one delivery: another process took it over while it was in progress", n)
	}
}

// With no webhooks, egress on a NATS lattice creates nothing in JetStream
// and takes no events.
func TestJetStreamNoWebhooksNoStreams(t *testing.T) {
	ns := jsServer(t)
	h := jsNode(t, ns, "a")
	h.publish(t, "Deployed", 0, 10)
	nc, err := natsgo.Connect("", natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	names := js.StreamNames(context.Background())
	for name := range names.Name() {
		t.Fatalf("stream %s created with no webhooks", name)
	}
	if h.mod.sub != nil {
		t.Fatal("egress subscribed with no webhooks")
	}
}

// A NATS server without JetStream is a clear error at start.
func TestJetStreamNotEnabled(t *testing.T) {
	ns, err := server.NewServer(&server.Options{DontListen: true, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	nc, err := natsgo.Connect("", natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	eng := axocoatl.New(axocoatl.Options{})
	defer eng.Close(context.Background())
	m, err := New(Config{Webhooks: []Webhook{{Name: "w", URL: "http://127.0.0.1:1/"}}, JetStream: &JetStream{Conn: nc}})
	if err != nil {
		t.Fatal(err)
	}
	err = eng.Use(context.Background(), m)
	if err == nil || !strings.Contains(err.Error(), "AXOCOATL_EGRESS") || !strings.Contains(err.Error(), "nats-server with -js") {
		t.Fatalf("start without JetStream: %v", err)
	}
}

// With the cluster's keys, a delivery queued in JetStream by a NATS user
// without the key (on the queue's subject, with the headers of a genuine
// one) is removed unsent and counted; the daemon's own are delivered, and
// a forged dead letter is neither listed nor retried.
func TestJetStreamForgedDeliveryRefused(t *testing.T) {
	ns := jsServer(t)
	rc := newReceiver(t, "js", func(received, int) int { return http.StatusOK })
	w := fast(Webhook{Name: "w", URL: rc.url(), Secret: "js", Events: []string{"Deployed"}})
	bus, err := latticenats.Connect("", latticenats.Options{Node: "a", Key: "egress-test-cluster-key-0123456789"}, natsgo.InProcessServer(ns), natsgo.Name("a"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	eng := axocoatl.New(axocoatl.Options{Bus: bus, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	m, err := New(Config{Webhooks: []Webhook{w}, JetStream: &JetStream{Conn: bus.Conn(), Prefix: bus.Prefix(), AckWait: 2 * time.Second, Keys: bus.Keyring()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	a := &harness{eng: eng, mod: m, logs: logs}
	t.Cleanup(func() { a.close(t); _ = bus.Close() })

	raw, err := natsgo.Connect("", natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	js, err := jetstream.New(raw)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	forged := natsgo.NewMsg("axocoatl_egress.queue.w")
	forged.Data = []byte(`{"delivery_id":"forged","event":{"type":"Deployed"}}`)
	forged.Header.Set(hdrDelivery, "forged")
	forged.Header.Set(hdrEventID, "forged")
	forged.Header.Set(hdrEventType, "Deployed")
	if _, err := js.PublishMsg(ctx, forged); err != nil {
		t.Fatal(err)
	}
	dead := natsgo.NewMsg("axocoatl_egress.dead.w.forged-dead")
	dead.Data = []byte(`{"id":"forged-dead","webhook":"w","event_type":"Deployed","body":"e30="}`)
	if _, err := js.PublishMsg(ctx, dead); err != nil {
		t.Fatal(err)
	}
	k := bus.Keyring()
	waitFor(t, 10*time.Second, "the forged delivery refused", func() bool { return k.Rejected(clustersig.Unsigned) > 0 })
	a.publish(t, "Deployed", 0, 1)
	waitFor(t, 10*time.Second, "the genuine delivery accepted", func() bool { return len(rc.accepted()) == 1 })
	for id := range rc.byDelivery() {
		if id == "forged" {
			t.Fatal("the forged delivery was sent")
		}
	}
	var list struct{ Deliveries []Delivery }
	if code := a.api(t, "GET", "/api/webhooks/w/deliveries?status=failed", &list); code != 200 || len(list.Deliveries) != 0 {
		t.Fatalf("dead letters listed: %d %+v", code, list)
	}
	if code := a.api(t, "POST", "/api/webhooks/w/deliveries/forged-dead/retry", nil); code != http.StatusNotFound && code != http.StatusConflict {
		t.Fatalf("a forged dead letter retried: %d", code)
	}
	if got := rc.count(); got != 1 {
		t.Fatalf("%d requests, want the genuine one", got)
	}
}
