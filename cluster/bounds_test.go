package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/cluster"
)

// Guards: bound "cancels of not-yet-seen tasks remembered" (1,024,
// docs/bounds.md, lattice and cluster). A peer cancels 2,048 task ids that
// daemon A has never seen: A remembers the latest 1,024 and forgets the
// oldest, so a task sent afterwards under a forgotten id runs, while one
// under a remembered id is answered canceled before it starts.
func TestCancelsOfUnseenTasksBounded(t *testing.T) {
	ns := startNATS(t, -1)
	a := newNode(t, ns.ClientURL(), "node-a", fast, map[string]agent.Model{"echo": provider.EchoModel{}})
	peer, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	const sent, kept = 2048, 1024
	for i := range sent {
		if err := peer.Publish("ct-cluster.cancel", fmt.Appendf(nil, `{"task_id":"t%d","from":"node-c"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := peer.FlushTimeout(time.Minute); err != nil {
		t.Fatal(err)
	}
	// One subscription takes the cancels in order: once the last is
	// remembered, every one before it has been seen.
	eventually(t, "A has taken the last cancel", time.Minute, func() bool {
		_, has := a.m.Tombstones("node-c", fmt.Sprintf("t%d", sent-1))
		return has
	})
	n, _ := a.m.Tombstones("node-c", "t0")
	if n != kept {
		t.Fatalf("%d cancels of unseen tasks remembered, want %d", n, kept)
	}
	for _, tc := range []struct {
		id, kind string
	}{
		{"t0", ""},                            // forgotten: runs
		{fmt.Sprintf("t%d", sent-kept-1), ""}, // the last forgotten
		{fmt.Sprintf("t%d", sent-kept), "canceled"},
		{fmt.Sprintf("t%d", sent-1), "canceled"},
	} {
		// A run that lasts is first answered "accepted" (a loaded
		// machine); its end follows on the same inbox.
		inbox := "answers." + tc.id
		answers, err := peer.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		if err := peer.PublishRequest("ct-cluster.exec.echo", inbox, cluster.TaskBody(tc.id, "node-c", "api", 0, "x")); err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := answers.NextMsg(30 * time.Second)
			if err != nil {
				t.Fatalf("task %s: %v", tc.id, err)
			}
			accepted, kind, text, ok := cluster.ReadAnswer(msg.Data)
			if !ok {
				t.Fatalf("task %s: answer %q", tc.id, msg.Data)
			}
			if accepted != "" {
				continue
			}
			if kind != tc.kind {
				t.Fatalf("task %s: ended %q (%s), want kind %q", tc.id, kind, text, tc.kind)
			}
			break
		}
		_ = answers.Unsubscribe()
	}
}

// Guards: bound cluster.accept_timeout (docs/bounds.md). A peer announces
// an agent and subscribes to its tasks but never takes one (a daemon too
// busy to read, or a broken one): a task for it fails with ErrUnavailable
// naming the bound once accept_timeout (here 300ms) has passed, not before
// and not at the caller's own, much later, deadline.
func TestAcceptTimeout(t *testing.T) {
	ns := startNATS(t, -1)
	cfg := fast
	cfg.AcceptTimeout = 300 * time.Millisecond
	b := newNode(t, ns.ClientURL(), "node-b", cfg, nil)
	fake, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	// Subscribed, so NATS does not answer "no responders" at once.
	if _, err := fake.Subscribe("ct-cluster.exec.ghost", func(*natsgo.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := fake.Publish("ct-cluster.announce", []byte(`{"node":"fake","ttl_ms":60000,"agents":[{"id":"ghost"}]}`)); err != nil {
		t.Fatal(err)
	}
	_ = fake.Flush()
	eventually(t, "B lists ghost on fake", 5*time.Second, func() bool { return lists(b.e, "ghost", "fake") })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err = b.e.Execute(ctx, "ghost", "x")
	took := time.Since(start)
	if !errors.Is(err, axocoatl.ErrUnavailable) || !strings.Contains(err.Error(), "no daemon took the task within 300ms") {
		t.Fatalf("task nobody takes: %v, want ErrUnavailable naming accept_timeout", err)
	}
	if took < cfg.AcceptTimeout || took > 20*time.Second {
		t.Fatalf("refused after %v, accept_timeout %v", took, cfg.AcceptTimeout)
	}
}

// bigAnswer answers every request with n bytes.
type bigAnswer struct{ n int }

func (m bigAnswer) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return &agent.Response{Content: strings.Repeat("a", m.n)}, nil
}

// Guards: bound "a task and its answer" (NATS max_payload, 1 MiB,
// docs/bounds.md, lattice and cluster). A task whose input is over the
// server's max_payload fails at its caller with an error naming both sizes,
// before anything is sent; an answer over it comes back as a failed task
// naming both sizes, not as nothing (a publish NATS refuses would leave the
// caller waiting).
func TestTaskAndAnswerWithinMaxPayload(t *testing.T) {
	ns := startNATS(t, -1)
	newNode(t, ns.ClientURL(), "node-a", fast, map[string]agent.Model{"echo": provider.EchoModel{}, "big": bigAnswer{2 << 20}})
	b := newNode(t, ns.ClientURL(), "node-b", fast, nil)
	eventually(t, "B lists echo and big", 5*time.Second, func() bool { return lists(b.e, "echo", "node-a") && lists(b.e, "big", "node-a") })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	limit := b.bus.Conn().MaxPayload()
	if limit != 1<<20 {
		t.Fatalf("the embedded nats-server's max_payload is %d, the docs say 1 MiB", limit)
	}

	_, err := b.e.Execute(ctx, "echo", strings.Repeat("x", 2<<20))
	if err == nil || !strings.Contains(err.Error(), "over NATS max_payload (1048576 bytes)") || !strings.Contains(err.Error(), "the task is 2097") {
		t.Fatalf("a 2 MiB task: %v, want an error naming its size and max_payload", err)
	}
	_, err = b.e.Execute(ctx, "big", "x")
	if err == nil || !strings.Contains(err.Error(), "its answer of 2097") || !strings.Contains(err.Error(), "over NATS max_payload (1048576 bytes)") {
		t.Fatalf("a 2 MiB answer: %v, want a failure naming its size and max_payload", err)
	}
	if res, err := b.e.Execute(ctx, "echo", "still here"); err != nil || res.Output != "still here" {
		t.Fatalf("after the oversized ones: %+v %v", res, err)
	}
}

// Guards: bound cluster.max_announce_bytes (docs/bounds.md), as sent. A
// daemon with 200 agents (about 25 KiB of announcement) and a bound of
// 4 KiB announces the agents that fit and leaves out the rest: the other daemon lists some of them, not all, and a listed one
// runs.
func TestAnnouncementWithinMaxAnnounceBytes(t *testing.T) {
	ns := startNATS(t, -1)
	cfg := fast
	cfg.MaxAnnounceBytes = 4096
	agents := map[string]agent.Model{}
	for i := range 200 {
		agents[fmt.Sprintf("agent%03d", i)] = provider.EchoModel{}
	}
	newNode(t, ns.ClientURL(), "node-a", cfg, agents)
	b := newNode(t, ns.ClientURL(), "node-b", fast, nil)
	var listed []string
	eventually(t, "B lists some of A's agents", 5*time.Second, func() bool {
		listed = listed[:0]
		for id := range agents {
			if lists(b.e, id, "node-a") {
				listed = append(listed, id)
			}
		}
		return len(listed) > 0
	})
	// B lists the agents of an announcement together, so what it lists
	// now is one whole announcement.
	if len(listed) == 0 || len(listed) == len(agents) {
		t.Fatalf("B lists %d of A's %d agents; with max_announce_bytes 4096 some, not all, fit", len(listed), len(agents))
	}
	t.Logf("%d of %d agents announced within 4096 bytes", len(listed), len(agents))
	if res, err := b.e.Execute(context.Background(), listed[0], "hi"); err != nil || res.Output != "hi" {
		t.Fatalf("a listed agent on A: %+v %v", res, err)
	}
}
