package egress

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	axocoatl "github.com/axocoatl/axocoatl-go"
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
	sa, sb := a.status(t, "w"), b.status(t, "w")
	if sa.Store != "jetstream" || sa.Delivered+sb.Delivered != 2*n {
		t.Fatalf("status a %+v b %+v: want %d delivered between them", sa, sb, 2*n)
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
