package egress

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// A message the server sends again while this process still sends it (its
// lease lapsed: renewals late behind a stall) is not sent a second time,
// and one sent again after this process delivered it (the ack came late)
// is acknowledged, not sent: within one process a delivery goes out once.
// The stall is made real by renewals slower than the server's lease: the
// module renews every 10 s (AckWait 30 s) and the messages come from a
// consumer of the test's whose lease is 1 s.
func TestJetStreamRedeliveryToTheSenderIsNotSentAgain(t *testing.T) {
	ns := jsServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a failure bound
	defer cancel()
	ctxDone := ctx.Done()
	held := make(chan struct{}, 4)
	release := make(chan struct{})
	rc := newReceiver(t, "", func(r received, n int) int {
		if r.msg.DeliveryID == "held-1" && n == 1 {
			held <- struct{}{}
			select {
			case <-release:
			case <-ctxDone: // the test failed: let the receiver close
			}
		}
		return http.StatusOK
	})
	bus, err := latticenats.Connect("", latticenats.Options{Node: "a"}, natsgo.InProcessServer(ns), natsgo.Name("a"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	eng := axocoatl.New(axocoatl.Options{Bus: bus, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	w := fast(Webhook{Name: "w", URL: rc.url(), Events: []string{"Never"}, Timeout: time.Minute})
	m, err := New(Config{Webhooks: []Webhook{w}, JetStream: &JetStream{Conn: bus.Conn(), Prefix: bus.Prefix(), AckWait: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	harn := &harness{eng: eng, mod: m, logs: logs}
	t.Cleanup(func() { harn.close(t); _ = bus.Close() })
	h := m.hooks[0]
	b := m.backendOf(h).(*jsBackend)

	s, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "TEST_LEASE", Subjects: []string{"lease.>"}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "lease", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	queue := func(id string) {
		d := &delivery{id: id, eventID: "ev-" + id, eventType: "Deployed", created: time.Now(),
			body: []byte(`{"delivery_id":"` + id + `","event_id":"ev-` + id + `","event_type":"Deployed","produced_by":"a","timestamp":` + strconv.FormatInt(time.Now().Unix(), 10) + `,"payload":{}}`)}
		msg := b.queueMsg("w", d, id)
		msg.Subject = "lease.w"
		if _, err := b.js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	// next fetches one message; delivered is how many times the server
	// has sent it.
	next := func() (jetstream.Msg, uint64) {
		t.Helper()
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		msg, ok := <-batch.Messages()
		if !ok {
			t.Fatalf("no message within 30s: %v", batch.Error())
		}
		md, err := msg.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		return msg, md.NumDelivered
	}

	// In flight here when it comes back.
	queue("held-1")
	first, _ := next()
	sent := make(chan struct{})
	go func() { defer close(sent); b.deliver(ctx, h, first) }()
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the first send never reached the receiver")
	}
	again, n := next() // after the 1 s lease: no renewal came
	if n != 2 {
		t.Fatalf("fetched a message delivered %d times, want the redelivery", n)
	}
	b.deliver(ctx, h, again)
	if c := len(rc.byDelivery()["held-1"]); c != 0 {
		t.Fatalf("the redelivery was sent while the first send is in flight (%d requests answered)", c)
	}
	if !strings.Contains(logs.String(), "left to that sender") {
		t.Fatalf("the redelivery was not recognised: %s", logs.String())
	}
	close(release)
	<-sent

	// Delivered here before its redelivery is handled.
	queue("late-ack-2")
	early, _ := next()
	late, n := next() // the first copy not acked within the lease
	if n != 2 {
		t.Fatalf("fetched a message delivered %d times, want the redelivery", n)
	}
	b.deliver(ctx, h, early)
	b.deliver(ctx, h, late)
	if c := len(rc.byDelivery()["late-ack-2"]); c != 1 {
		t.Fatalf("late-ack-2 was sent %d times by this process, want once", c)
	}
	if c := len(rc.byDelivery()["held-1"]); c != 1 {
		t.Fatalf("held-1 was sent %d times, want once", c)
	}
	// An ack is fire-and-forget and the server settles it on the consumer's
	// own goroutine: wait for the count to settle (a loaded machine takes
	// its time), but a message never acked stays and fails the test.
	var left string // logged when it changes, not on every poll
	waitFor(t, 10*time.Second, "no message left in the consumer (none waiting, none unacknowledged)", func() bool {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending != 0 || info.NumPending != 0 {
			if now := fmt.Sprintf("messages left: %d waiting, %d unacknowledged", info.NumPending, info.NumAckPending); now != left {
				left = now
				t.Log(now)
			}
			return false
		}
		return true
	})
}
