package cluster_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/cluster"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// A daemon whose Engine is at its MaxRuns refuses a task for another with
// ErrBusy: the caller must see ErrUnavailable (a door's 503 "retry
// later"), not a failure of the agent.
func TestRemoteEngineBusyIsUnavailable(t *testing.T) {
	ns := startNATS(t, -1)
	bus, err := latticenats.Connect(ns.ClientURL(), latticenats.Options{Prefix: "ct", Node: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	slow := newBlocking()
	ea := axocoatl.New(axocoatl.Options{Bus: bus, MaxRuns: 1})
	if err := ea.AddAgent(agent.Spec{ID: "slow"}, slow); err != nil {
		t.Fatal(err)
	}
	ma, err := cluster.New(fast)
	if err != nil {
		t.Fatal(err)
	}
	if err := ea.Use(context.Background(), ma); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ea.Close(ctx)
		_ = bus.Close()
	})
	b := newNode(t, ns.ClientURL(), "node-b", fast, nil)
	eventually(t, "B lists slow", 5*time.Second, func() bool { return lists(b.e, "slow", "node-a") })

	done := make(chan error, 1)
	go func() {
		_, err := ea.Execute(context.Background(), "slow", "holds A's only run")
		done <- err
	}()
	<-slow.started
	_, err = b.e.Execute(context.Background(), "slow", "second")
	if !errors.Is(err, axocoatl.ErrUnavailable) || !strings.Contains(err.Error(), "MaxRuns") {
		t.Errorf("a task for a busy daemon: %v, want ErrUnavailable naming the bound", err)
	}
	close(slow.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A peer that lists one agent twice in its announcement gets it listed
// once, with its node named once; a timeout_ms so large that it overflows
// a Duration is no deadline at all, not one already past.
func TestHostilePeerDuplicatesAndHugeTimeout(t *testing.T) {
	ns := startNATS(t, -1)
	a := newNode(t, ns.ClientURL(), "node-a", fast, map[string]agent.Model{"echo": provider.EchoModel{}})
	peer, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if err := peer.Publish("ct-cluster.announce", []byte(`{"node":"dup","ttl_ms":60000,"agents":[{"id":"twice","running":2},{"id":"twice","running":3}]}`)); err != nil {
		t.Fatal(err)
	}
	_ = peer.Flush()
	eventually(t, "twice listed", 5*time.Second, func() bool { _, err := a.e.Agent("twice"); return err == nil })
	if info, _ := a.e.Agent("twice"); info.Node != "dup" {
		t.Errorf("an agent announced twice by one daemon is listed on %q, want \"dup\"", info.Node)
	}
	n := 0
	for _, info := range a.e.Agents() {
		if info.ID == "twice" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("twice listed %d times", n)
	}

	if kind, text := finalAnswer(t, peer, "ct-cluster.exec.echo", cluster.TaskBody("t-huge", "x", "api", math.MaxInt64, "hi")); kind != "" || text != "hi" {
		t.Errorf("a task with a huge timeout: %s %q", kind, text)
	}
}

// A daemon shutting down gracefully waits for its runs in flight; meanwhile
// it must not take new tasks from the others (it would refuse them: 503)
// while another daemon hosting the same agent can run them.
func TestClosingDaemonTakesNoNewTasks(t *testing.T) {
	ns := startNATS(t, -1)
	slow := newBlocking()
	a := newNode(t, ns.ClientURL(), "node-a", fast, map[string]agent.Model{"slow": slow, "echo": provider.EchoModel{}})
	newNode(t, ns.ClientURL(), "node-c", fast, map[string]agent.Model{"echo": provider.EchoModel{}})
	b := newNode(t, ns.ClientURL(), "node-b", fast, nil)
	eventually(t, "B lists echo on A and C", 5*time.Second, func() bool { return lists(b.e, "echo", "node-a,node-c") })

	running := make(chan error, 1)
	go func() {
		_, err := a.e.Execute(context.Background(), "slow", "keeps A draining")
		running <- err
	}()
	<-slow.started
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		closed <- a.e.Close(ctx)
	}()
	time.Sleep(50 * time.Millisecond) // A is draining its run
	for i := range 20 {
		if _, err := b.e.Execute(context.Background(), "echo", "x"); err != nil {
			t.Errorf("task %d sent while A drains: %v", i, err)
		}
	}
	close(slow.release)
	if err := <-running; err != nil {
		t.Errorf("A's run in flight: %v", err)
	}
	if err := <-closed; err != nil {
		t.Error(err)
	}
}

// Two daemons given one node name (a config copied without changing
// lattice.node) cannot see each other's agents and take each other's
// events for their own: each says so in its log, not silently.
func TestSameNodeNameIsReported(t *testing.T) {
	ns := startNATS(t, -1)
	var logs [2]*testutil.SyncBuffer
	for i := range logs {
		logs[i] = &testutil.SyncBuffer{}
		cfg := fast
		cfg.Logger = slog.New(slog.NewTextHandler(logs[i], nil))
		newNode(t, ns.ClientURL(), "twin", cfg, map[string]agent.Model{"echo": provider.EchoModel{}})
	}
	eventually(t, "both daemons report the shared name", 5*time.Second, func() bool {
		return strings.Contains(logs[0].String(), "same node name") && strings.Contains(logs[1].String(), "same node name")
	})
}

// A cancel names the task and the daemon that sent it: one from another
// daemon for a task id that is not running yet (task ids may come from
// clients: A2A's /a2a/tasks "id") must not stop a later task of that id
// sent by someone else.
func TestEarlyCancelOnlyForItsSender(t *testing.T) {
	ns := startNATS(t, -1)
	newNode(t, ns.ClientURL(), "node-a", fast, map[string]agent.Model{"echo": provider.EchoModel{}})
	b := newNode(t, ns.ClientURL(), "node-b", fast, nil)
	eventually(t, "B lists echo", 5*time.Second, func() bool { return lists(b.e, "echo", "node-a") })
	peer, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if err := peer.Publish("ct-cluster.cancel", []byte(`{"task_id":"client-chosen-1","from":"node-c"}`)); err != nil {
		t.Fatal(err)
	}
	_ = peer.Flush()
	time.Sleep(100 * time.Millisecond) // A has heard it
	res, err := b.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "echo", Input: "mine", TaskID: "client-chosen-1"})
	if err != nil || res.Output != "mine" {
		t.Fatalf("B's task after C's cancel of the same id: %+v %v", res, err)
	}
}

// A task taken by a daemon this one does not track (over max_nodes here;
// or one whose answer NATS dropped) must not wait forever when that daemon
// dies: the run's keepalives stop and the caller fails the task with
// ErrUnavailable within expire_after.
//
// Guards: bound cluster.max_nodes (docs/bounds.md): B, at max_nodes 1,
// tracks the fake daemon and not A.
func TestUntrackedExecutorDiesCallerFails(t *testing.T) {
	ns := startNATS(t, -1)
	cfgB := fast
	cfgB.MaxNodes = 1
	b := newNode(t, ns.ClientURL(), "node-b", cfgB, nil)
	// A fake daemon fills B's one slot and lists "slow" without serving it.
	fake, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	announce := func() {
		_ = fake.Publish("ct-cluster.announce", []byte(`{"node":"fake","ttl_ms":60000,"agents":[{"id":"slow"}]}`))
		_ = fake.Flush()
	}
	announce()
	eventually(t, "B lists slow on fake", 5*time.Second, func() bool { return lists(b.e, "slow", "fake") })
	slow := newBlocking()
	a := newNode(t, ns.ClientURL(), "node-a", fast, map[string]agent.Model{"slow": slow})
	time.Sleep(200 * time.Millisecond)
	if p := b.m.Peers(); len(p) != 1 || p[0] != "fake" {
		t.Fatalf("B tracks %v", p)
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		_, err := b.e.Execute(ctx, "slow", "x")
		done <- err
	}()
	<-slow.started
	time.Sleep(100 * time.Millisecond) // accepted
	// A dies: its connection goes without a word.
	a.bus.Conn().Close()
	t0 := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, axocoatl.ErrUnavailable) {
			t.Fatalf("after A died: %v, want ErrUnavailable", err)
		}
		t.Logf("failed %s after A died: %v", time.Since(t0).Round(time.Millisecond), err)
	case <-time.After(5 * time.Second):
		t.Fatal("the task still waits 5s after the daemon running it died")
	}
	close(slow.release)
}

// A node name the other daemons would drop (too long, or with characters
// a subject token cannot hold) is refused at Start, not left to make this
// daemon silently invisible.
func TestNodeNameCheckedAtStart(t *testing.T) {
	ns := startNATS(t, -1)
	for _, name := range []string{strings.Repeat("n", 200), "tab\there"} {
		nc, err := natsgo.Connect(ns.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		e := axocoatl.New(axocoatl.Options{})
		m, err := cluster.New(cluster.Config{Conn: nc, Node: name, Prefix: "ct"})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Use(context.Background(), m); err == nil || !strings.Contains(err.Error(), "node name") {
			t.Errorf("node %q: %v", name, err)
		}
		_ = e.Close(context.Background())
		nc.Close()
	}
}

// A peer floods a daemon with tasks for its agent, far more than its
// task queue and runs: the daemon stays up, every task it took is
// answered (run or refused busy), the others are dropped by NATS (their
// sender would time out), its worker goroutines stay within
// max_concurrent_runs + 1 and go back down, and a task from another daemon
// runs afterwards.
//
// Guards: bound cluster.max_concurrent_runs (docs/bounds.md).
func TestTaskFlood(t *testing.T) {
	ns := startNATS(t, -1)
	cfg := fast
	cfg.MaxConcurrentRuns = 4
	a := newNode(t, ns.ClientURL(), "node-a", cfg, map[string]agent.Model{"echo": provider.EchoModel{}})
	b := newNode(t, ns.ClientURL(), "node-b", fast, nil)
	peer, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	answers, err := peer.SubscribeSync("flood.answers")
	if err != nil {
		t.Fatal(err)
	}
	if err := answers.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	const n = 20_000
	for i := range n {
		body := cluster.TaskBody("flood-"+strconv.Itoa(i), "peer", "api", 0, "x")
		if err := peer.PublishRequest("ct-cluster.exec.echo", "flood.answers", body); err != nil {
			t.Fatal(err)
		}
	}
	// A minute, not Flush's 10 s: 20,000 publishes reach a loaded
	// machine's nats-server slowly.
	if err := peer.FlushTimeout(time.Minute); err != nil {
		t.Fatal(err)
	}
	peak, peakWorkers := 0, 0
	got, ok, busy := 0, 0, 0
	for {
		msg, err := answers.NextMsg(2 * time.Second)
		if err != nil {
			break // quiet for 2 s: the rest were dropped
		}
		peak = max(peak, runtime.NumGoroutine())
		peakWorkers = max(peakWorkers, a.m.Workers())
		accepted, kind, _, valid := cluster.ReadAnswer(msg.Data)
		if !valid {
			t.Fatalf("answer %q", msg.Data)
		}
		if accepted != "" {
			continue // a run that lasted (the machine is busy): its answer follows
		}
		got++
		switch kind {
		case "":
			ok++
		case "busy":
			busy++
		default:
			t.Fatalf("answer %q", msg.Data)
		}
	}
	t.Logf("%d tasks: %d answered (%d run, %d busy), peak goroutines %d (before %d), peak workers %d, now %d", n, got, ok, busy, peak, before, peakWorkers, a.m.Workers())
	if ok == 0 || got > n {
		t.Fatalf("%d answered, %d run", got, ok)
	}
	if peak > before+cfg.MaxConcurrentRuns+1+20 {
		t.Errorf("peak %d goroutines, %d before: workers beyond max_concurrent_runs+1", peak, before)
	}
	if peakWorkers > cfg.MaxConcurrentRuns+1 {
		t.Errorf("%d workers, max_concurrent_runs is %d", peakWorkers, cfg.MaxConcurrentRuns)
	}
	// Idle again, the workers go back to at most three waiting (one exits
	// when it finds two others waiting).
	if w := a.m.Workers(); w > 3 {
		t.Errorf("%d workers left after the flood", w)
	}
	if res, err := b.e.Execute(context.Background(), "echo", "after the flood"); err != nil || res.Output != "after the flood" {
		t.Fatalf("after the flood: %v %v", res, err)
	}
}

// A daemon (or a peer posing as one) that answers a task with an absurd
// duration_ms must not give the caller a negative or wrapped duration
// (it reaches API answers and metrics): it is capped.
func TestHostileAnswerDuration(t *testing.T) {
	ns := startNATS(t, -1)
	b := newNode(t, ns.ClientURL(), "node-b", fast, nil)
	fake, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	var ms atomic.Uint64
	sub, err := fake.Subscribe("ct-cluster.exec.far", func(msg *natsgo.Msg) {
		a := binary.AppendUvarint([]byte{'D'}, ms.Load())
		a = binary.AppendUvarint(a, 0) // kind "": success
		_ = msg.Respond(append(a, "ok"...))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = fake.Publish("ct-cluster.announce", []byte(`{"node":"fake","ttl_ms":60000,"agents":[{"id":"far"}]}`))
	_ = fake.Flush()
	eventually(t, "B lists far on fake", 5*time.Second, func() bool { return lists(b.e, "far", "fake") })
	for _, v := range []uint64{math.MaxInt64, 1 << 62, 9_300_000_000_000} {
		ms.Store(v)
		res, err := b.e.Execute(context.Background(), "far", "x")
		if err != nil || res.Output != "ok" {
			t.Fatalf("answer: %v %v", res, err)
		}
		if res.Duration < 0 {
			t.Errorf("duration_ms %d read as %s", v, res.Duration)
		}
	}
}

// A cluster in a rolling upgrade: daemons of the version before the task
// frame (JSON tasks and answers) and of this one. Neither side can run the
// other's task, and neither may leave it to the accept timeout with "no
// daemon took the task": each answers at once, in the form the other
// reads, that the daemons' versions differ (unavailable: another daemon
// hosting the agent may take it).
func TestOlderDaemonWire(t *testing.T) {
	ns := startNATS(t, -1)
	cfg := fast
	cfg.AcceptTimeout = 3 * time.Second
	a := newNode(t, ns.ClientURL(), "node-a", cfg, map[string]agent.Model{"echo": provider.EchoModel{}})
	b := newNode(t, ns.ClientURL(), "node-b", cfg, nil)
	old, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	// An older daemon sends A a task: it reads the answer as JSON.
	msg, err := old.Request("ct-cluster.exec.echo", []byte(`{"task_id":"t1","agent_id":"echo","input":"x","source":"api","from":"old"}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Done        bool
		Kind, Error string
	}
	if err := json.Unmarshal(msg.Data, &r); err != nil || !r.Done || r.Kind != "unavailable" || !strings.Contains(r.Error, "version") {
		t.Fatalf("answer to an older daemon's task: %q (%v)", msg.Data, err)
	}

	// B sends a task to an older daemon, which answers in JSON that it
	// cannot read it.
	sub, err := old.Subscribe("ct-cluster.exec.far", func(msg *natsgo.Msg) {
		_ = msg.Respond([]byte(`{"done":true,"error":"cluster: malformed task request","kind":"failed"}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = old.Publish("ct-cluster.announce", []byte(`{"node":"old","ttl_ms":60000,"agents":[{"id":"far"}]}`))
	_ = old.Flush()
	eventually(t, "B lists far on old", 5*time.Second, func() bool { return lists(b.e, "far", "old") })
	t0 := time.Now()
	_, err = b.e.Execute(context.Background(), "far", "x")
	if !errors.Is(err, axocoatl.ErrUnavailable) || !strings.Contains(err.Error(), "version") || time.Since(t0) > time.Second {
		t.Fatalf("a task answered by an older daemon: %v after %s", err, time.Since(t0))
	}
	_ = a
}
