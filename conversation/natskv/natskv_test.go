package natskv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/conversation/natskv"
	"github.com/axocoatl/axocoatl-go/conversation/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

func connect(t testing.TB, ns *server.Server) *natsgo.Conn {
	t.Helper()
	nc, err := natsgo.Connect("", natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func open(t testing.TB, nc *natsgo.Conn, cfg natskv.Config) *natskv.Store {
	t.Helper()
	cfg.Conn = nc
	s, err := natskv.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Guards: every conversations.* bound (storetest) on the JetStream KV store.
func TestStore(t *testing.T) {
	ns := jsServer(t)
	n := 0
	storetest.Run(t, func(t *testing.T, l conversation.Limits) conversation.Store {
		n++ // a bucket per subtest: each starts empty
		return open(t, connect(t, ns), natskv.Config{Bucket: "t" + string(rune('a'+n)), Limits: l})
	})
}

var ctx = context.Background()

func msg(text string) conversation.Message {
	return conversation.Message{Role: agent.RoleUser, Content: text, At: time.Now().UTC()}
}

// A conversation of max_bytes (8 MiB) in one turn is written in parts
// under NATS max_payload (1 MiB) and reads back whole.
func TestEightMiBConversation(t *testing.T) {
	ns := jsServer(t)
	nc := connect(t, ns)
	s := open(t, nc, natskv.Config{})
	if err := s.Create(ctx, conversation.Info{ID: "big", AgentID: "a"}); err != nil {
		t.Fatal(err)
	}
	big := msg(strings.Repeat("0123456789abcdef", (conversation.DefaultMaxBytes-64)/16))
	if int64(len(big.Content)) <= nc.MaxPayload() {
		t.Fatalf("a message of %d bytes fits max_payload %d: not a test of parts", len(big.Content), nc.MaxPayload())
	}
	if err := s.Append(ctx, "big", []conversation.Message{big}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Messages(ctx, "big", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Content != big.Content {
		t.Fatalf("read back %d messages, first of %d bytes; want 1 of %d", len(got), len(got[0].Content), len(big.Content))
	}
	// The conversation is at max_bytes: one more byte is refused.
	if err := s.Append(ctx, "big", []conversation.Message{msg(strings.Repeat("x", 100))}); !errors.Is(err, conversation.ErrFull) {
		t.Fatalf("Append past max_bytes = %v, want ErrFull", err)
	}
}

// Two stores on one bucket (two daemons): each sees the other's
// conversations and turns, a lease held through one refuses the other,
// and the other's index follows creations for List.
func TestTwoStoresOneBucket(t *testing.T) {
	ns := jsServer(t)
	a := open(t, connect(t, ns), natskv.Config{Bucket: "shared"})
	b := open(t, connect(t, ns), natskv.Config{Bucket: "shared"})
	if err := a.Create(ctx, conversation.Info{ID: "c1", AgentID: "x", Title: "hello"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, conversation.Info{ID: "c1", AgentID: "x"}); !errors.Is(err, conversation.ErrExists) {
		t.Fatalf("Create on b of a's id = %v, want ErrExists", err)
	}
	if err := a.Append(ctx, "c1", []conversation.Message{msg("turn one")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ctx, "c1", []conversation.Message{msg("turn two")}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*natskv.Store{a, b} {
		msgs, err := s.Messages(ctx, "c1", 0, 0)
		if err != nil || len(msgs) != 2 || msgs[0].Content != "turn one" || msgs[1].Content != "turn two" {
			t.Fatalf("Messages = %+v, %v", msgs, err)
		}
	}
	release, err := a.Lock(ctx, "c1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(ctx, "c1", time.Minute); !errors.Is(err, conversation.ErrBusy) {
		t.Fatalf("b's Lock while a holds the lease = %v, want ErrBusy", err)
	}
	release()
	rb, err := b.Lock(ctx, "c1", time.Minute)
	if err != nil {
		t.Fatalf("b's Lock after a released = %v", err)
	}
	rb()
	waitFor(t, "b lists c1 with 2 messages", func() bool {
		p, err := b.List(ctx, conversation.Query{})
		return err == nil && len(p.Conversations) == 1 && p.Conversations[0].Messages == 2
	})
	if err := b.Delete(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ctx, "c1"); !errors.Is(err, conversation.ErrNotFound) {
		t.Fatalf("a's Get after b's Delete = %v", err)
	}
	waitFor(t, "a's List drops c1", func() bool {
		p, err := a.List(ctx, conversation.Query{})
		return err == nil && len(p.Conversations) == 0
	})
}

// A lease never released (its daemon died mid-turn) ends after its ttl
// for the other daemons, not before.
func TestLeaseOfDeadDaemonExpires(t *testing.T) {
	ns := jsServer(t)
	a := open(t, connect(t, ns), natskv.Config{Bucket: "shared"})
	b := open(t, connect(t, ns), natskv.Config{Bucket: "shared"})
	if err := a.Create(ctx, conversation.Info{ID: "c1", AgentID: "x"}); err != nil {
		t.Fatal(err)
	}
	const ttl = 1500 * time.Millisecond
	start := time.Now()
	if _, err := a.Lock(ctx, "c1", ttl); err != nil {
		t.Fatal(err)
	}
	waitLock(t, b, "c1", start, ttl)
}

// A turn's lease is renewed while it runs (a turn may last longer than
// three renew intervals), and a daemon that dies mid-turn holds the
// conversation for three renew intervals at most, not the turn's ttl.
func TestLeaseRenewedUntilDaemonDies(t *testing.T) {
	ns := jsServer(t)
	ncA := connect(t, ns)
	// 500 ms, not less: a renewal has one interval to reach the server, and
	// under the race detector on a loaded machine 200 ms was sometimes not
	// enough (the lease lapsed while its daemon lived).
	const renew = 500 * time.Millisecond
	a := open(t, ncA, natskv.Config{Bucket: "shared", LeaseRenew: renew})
	b := open(t, connect(t, ns), natskv.Config{Bucket: "shared"})
	if err := a.Create(ctx, conversation.Info{ID: "c1", AgentID: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Lock(ctx, "c1", time.Hour); err != nil {
		t.Fatal(err)
	}
	// Past three renew intervals and the key's whole-second TTL: still
	// held, because renewed.
	held := time.Now()
	for time.Since(held) < 10*renew+time.Second {
		if _, err := b.Lock(ctx, "c1", time.Minute); !errors.Is(err, conversation.ErrBusy) {
			t.Fatalf("after %v of a lease of an hour renewed every %v: Lock = %v, want ErrBusy", time.Since(held), renew, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	died := time.Now()
	_ = a.Close()
	ncA.Close() // gone mid-turn, without releasing
	waitLock(t, b, "c1", died, 0)
	if d := time.Since(died); d > 3*renew+2*time.Second+5*time.Second {
		t.Fatalf("the dead daemon's lease held for %v, renew %v", d, renew)
	}
}

// waitLock waits until s takes id's lease, which must not happen before
// start+notBefore (less a margin for the clock).
func waitLock(t *testing.T, s *natskv.Store, id string, start time.Time, notBefore time.Duration) {
	t.Helper()
	for {
		release, err := s.Lock(ctx, id, time.Minute)
		if err == nil {
			if d := time.Since(start); d < notBefore-100*time.Millisecond {
				t.Fatalf("the lease ended after %v, its ttl is %v", d, notBefore)
			}
			release()
			return
		}
		if !errors.Is(err, conversation.ErrBusy) {
			t.Fatal(err)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("a lease never released did not end")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Appends to one conversation from two stores at once: every one recorded
// once (the commit is an Update at the revision read, retried).
func TestConcurrentAppendsOneConversationTwoStores(t *testing.T) {
	ns := jsServer(t)
	a := open(t, connect(t, ns), natskv.Config{Bucket: "shared"})
	b := open(t, connect(t, ns), natskv.Config{Bucket: "shared"})
	if err := a.Create(ctx, conversation.Info{ID: "c1", AgentID: "x"}); err != nil {
		t.Fatal(err)
	}
	const each = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	for i, s := range []*natskv.Store{a, b} {
		for j := range each {
			wg.Go(func() {
				if err := s.Append(ctx, "c1", []conversation.Message{msg(fmt.Sprintf("%d-%d", i, j))}); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	msgs, err := b.Messages(ctx, "c1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, m := range msgs {
		seen[m.Content]++
	}
	if len(msgs) != 2*each || len(seen) != 2*each {
		t.Fatalf("%d messages, %d distinct; want %d each once", len(msgs), len(seen), 2*each)
	}
	if info, _ := a.Get(ctx, "c1"); info.Messages != 2*each {
		t.Fatalf("info counts %d messages, want %d", info.Messages, 2*each)
	}
}

// Delete leaves nothing of the conversation in the stream but the info
// key's purge marker (no data).
func TestDeleteForGood(t *testing.T) {
	ns := jsServer(t)
	nc := connect(t, ns)
	s := open(t, nc, natskv.Config{Bucket: "del"})
	if err := s.Create(ctx, conversation.Info{ID: "c1", AgentID: "x"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Append(ctx, "c1", []conversation.Message{msg("secret text")}); err != nil {
			t.Fatal(err)
		}
	}
	release, err := s.Lock(ctx, "c1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "KV_del")
	if err != nil {
		t.Fatal(err)
	}
	subjects := func() map[string]uint64 {
		si, err := stream.Info(ctx, jetstream.WithSubjectFilter("$KV.del.>"))
		if err != nil {
			t.Fatal(err)
		}
		return si.State.Subjects
	}
	if n := len(subjects()); n != 5 { // info, 3 parts, lease
		t.Fatalf("before Delete the stream holds %d subjects, want 5: %v", n, subjects())
	}
	if err := s.Delete(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	left := subjects()
	if len(left) != 1 {
		t.Fatalf("after Delete the stream holds %v, want only the info's purge marker", left)
	}
	kv, err := js.KeyValue(ctx, "del")
	if err != nil {
		t.Fatal(err)
	}
	for key := range left {
		e, err := stream.GetLastMsgForSubject(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Data) != 0 || e.Header.Get("KV-Operation") != "PURGE" {
			t.Fatalf("left %s: %q, headers %v", key, e.Data, e.Header)
		}
	}
	if keys, _ := kv.Keys(ctx); len(keys) != 0 {
		t.Fatalf("keys left: %v", keys)
	}
}

// The bucket's MaxBytes is a bound JetStream enforces: past it a turn is
// refused with ErrFull, the conversation as it was.
func TestBucketMaxBytes(t *testing.T) {
	ns := jsServer(t)
	s := open(t, connect(t, ns), natskv.Config{Bucket: "small", MaxBucketBytes: 64 << 10})
	if err := s.Create(ctx, conversation.Info{ID: "c1", AgentID: "x"}); err != nil {
		t.Fatal(err)
	}
	var err error
	n := 0
	for ; n < 100; n++ {
		if err = s.Append(ctx, "c1", []conversation.Message{msg(strings.Repeat("y", 8<<10))}); err != nil {
			break
		}
	}
	if !errors.Is(err, conversation.ErrFull) || !strings.Contains(err.Error(), "max_bucket_bytes") {
		t.Fatalf("after %d turns of 8 KiB in a bucket of 64 KiB: %v, want ErrFull naming max_bucket_bytes", n, err)
	}
	if info, _ := s.Get(ctx, "c1"); info.Messages != n {
		t.Fatalf("the conversation holds %d messages, %d were accepted", info.Messages, n)
	}
	if msgs, err := s.Messages(ctx, "c1", 0, 0); err != nil || len(msgs) != n {
		t.Fatalf("Messages = %d, %v; want %d", len(msgs), err, n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A bucket holding more conversations than a daemon's max_conversations
// (another daemon's config, a NATS user writing to it) does not grow that
// daemon's index past its bound: max_conversations and a quarter, plus 64.
func TestIndexBounded(t *testing.T) {
	ns := jsServer(t)
	small := open(t, connect(t, ns), natskv.Config{Bucket: "shared", Limits: conversation.Limits{MaxConversations: 40}})
	big := open(t, connect(t, ns), natskv.Config{Bucket: "shared"})
	const n = 200
	for i := range n {
		if err := big.Create(ctx, conversation.Info{ID: fmt.Sprintf("c%03d", i), AgentID: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "big lists them all", func() bool {
		p, err := big.List(ctx, conversation.Query{})
		return err == nil && len(p.Conversations) == n
	})
	// An update of the first after the 200: once small's watch shows it,
	// it has seen every one before (a watch delivers in order).
	if err := big.Append(ctx, "c000", []conversation.Message{msg("last")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "small sees the update", func() bool {
		p, err := small.List(ctx, conversation.Query{})
		return err == nil && len(p.Conversations) > 0 && p.Conversations[0].ID == "c000" && p.Conversations[0].Messages == 1
	})
	p, err := small.List(ctx, conversation.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if max := 40 + 40/4 + 64; len(p.Conversations) > max {
		t.Fatalf("small's index holds %d conversations, its bound is %d", len(p.Conversations), max)
	}
	if len(p.Conversations) < 40 {
		t.Fatalf("small's index holds %d conversations, fewer than its max_conversations", len(p.Conversations))
	}
}

// Eviction takes the least recently updated conversation as the bucket
// has it, not as a daemon's index last saw it: a conversation another
// daemon just continued is not evicted in its place (whether or not the
// watch reported that turn yet).
func TestEvictionSeesOtherDaemonsTurns(t *testing.T) {
	ns := jsServer(t)
	a := open(t, connect(t, ns), natskv.Config{Bucket: "shared", Limits: conversation.Limits{MaxPerAgent: 2}})
	b := open(t, connect(t, ns), natskv.Config{Bucket: "shared", Limits: conversation.Limits{MaxPerAgent: 2}})
	for round := range 20 {
		old, mid, fresh := fmt.Sprintf("old%d", round), fmt.Sprintf("mid%d", round), fmt.Sprintf("new%d", round)
		for _, id := range []string{old, mid} {
			if err := a.Create(ctx, conversation.Info{ID: id, AgentID: fmt.Sprint("agent", round)}); err != nil {
				t.Fatal(err)
			}
		}
		// b continues the oldest: mid is now the least recently updated.
		if err := b.Append(ctx, old, []conversation.Message{msg("continued on b")}); err != nil {
			t.Fatal(err)
		}
		if err := a.Create(ctx, conversation.Info{ID: fresh, AgentID: fmt.Sprint("agent", round)}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Get(ctx, old); err != nil {
			t.Fatalf("round %d: the conversation b just continued was evicted: %v", round, err)
		}
		if _, err := a.Get(ctx, mid); !errors.Is(err, conversation.ErrNotFound) {
			t.Fatalf("round %d: the least recently updated one is still there: %v", round, err)
		}
	}
}
