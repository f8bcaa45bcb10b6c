package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/cluster"
	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startNATS runs a real nats-server in the test process on port (-1: a
// free one); it is shut down when the test ends.
func startNATS(t testing.TB, port int) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
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

// fast is a heartbeat quick enough for tests to watch daemons come and go.
// Only tests of expiry use it: under the race detector on a loaded
// machine a daemon's heartbeat is late past 600 ms now and then, and a
// peer then takes it for gone (its runs for others canceled).
var fast = cluster.Config{HeartbeatInterval: 100 * time.Millisecond, ExpireAfter: 600 * time.Millisecond}

// patient is a heartbeat that still lists daemons quickly but forgives a
// silence of seconds: for tests of what crosses daemons, not of expiry.
var patient = cluster.Config{HeartbeatInterval: 100 * time.Millisecond, ExpireAfter: 10 * time.Second}

type node struct {
	name string
	e    *axocoatl.Engine
	bus  *latticenats.Bus
	m    *cluster.Module
	// local sees only this node's own events (what it ran).
	local lattice.Subscription
}

// newNode is an Engine on its own NATS connection with agents, and the
// cluster module; it is closed when the test ends (or earlier by the test).
func newNode(t testing.TB, url, name string, cfg cluster.Config, agents map[string]agent.Model) *node {
	t.Helper()
	return newNodeWith(t, url, latticenats.Options{Prefix: "ct", Node: name}, cfg, agents)
}

// newNodeWith is newNode with the bus's options (its keys).
func newNodeWith(t testing.TB, url string, opts latticenats.Options, cfg cluster.Config, agents map[string]agent.Model) *node {
	t.Helper()
	return newNodeEngine(t, url, opts, cfg, agents, axocoatl.Options{})
}

// newNodeEngine is newNodeWith with the Engine's options (its tracer
// provider); their Bus is the node's own.
func newNodeEngine(t testing.TB, url string, opts latticenats.Options, cfg cluster.Config, agents map[string]agent.Model, engOpts axocoatl.Options) *node {
	t.Helper()
	name := opts.Node
	bus, err := latticenats.Connect(url, opts,
		natsgo.MaxReconnects(-1), natsgo.ReconnectWait(50*time.Millisecond), natsgo.Name(name))
	if err != nil {
		t.Fatal(err)
	}
	engOpts.Bus = bus
	e := axocoatl.New(engOpts)
	for id, model := range agents {
		if err := e.AddAgent(agent.Spec{ID: id, Description: "agent " + id + " of " + name}, model); err != nil {
			t.Fatal(err)
		}
	}
	local, err := bus.Subscribe(lattice.Filter{Local: true, Types: []string{axocoatl.EventTaskCompleted, axocoatl.EventAgentFailed}}, 1024)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	n := &node{name: name, e: e, bus: bus, m: m, local: local}
	t.Cleanup(n.close)
	return n
}

func (n *node) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = n.e.Close(ctx)
	_ = n.bus.Close()
}

// nextRun is the next run this node itself finished.
func (n *node) nextRun(t *testing.T) (lattice.Event, map[string]any) {
	t.Helper()
	select {
	case ev := <-n.local.Events():
		var p map[string]any
		_ = json.Unmarshal(ev.Payload, &p)
		return ev, p
	case <-time.After(10 * time.Second):
		t.Fatalf("%s ran nothing within 10s", n.name)
	}
	panic("unreachable")
}

func eventually(t *testing.T, what string, within time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s", what, within)
	return 0
}

// finalAnswer sends a task body on subject and returns its final answer's
// kind and text, skipping the "accepted" answers a run that lasts past
// acceptAfter is first given (any run on a loaded machine): a plain
// Request would return the first of those instead.
func finalAnswer(t *testing.T, nc *natsgo.Conn, subject string, body []byte) (kind, text string) {
	t.Helper()
	inbox := nc.NewRespInbox()
	answers, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = answers.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, body); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := answers.NextMsg(30 * time.Second) // a failure bound: the answer is waited for
		if err != nil {
			t.Fatalf("%q: no final answer: %v", body, err)
		}
		accepted, kind, text, ok := cluster.ReadAnswer(msg.Data)
		if !ok {
			t.Fatalf("%q: unreadable answer %q", body, msg.Data)
		}
		if accepted == "" {
			return kind, text
		}
	}
}

func lists(e *axocoatl.Engine, id, node string) bool {
	a, err := e.Agent(id)
	return err == nil && a.Node == node
}

// blocking is a model that answers only when released, and reports the
// end of each call: how a long run looks from outside.
type blocking struct {
	started chan struct{}
	release chan struct{}
}

func newBlocking() *blocking {
	return &blocking{started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (b *blocking) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	b.started <- struct{}{}
	select {
	case <-b.release:
		return &agent.Response{Content: "released"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A task for an agent hosted on A, sent from B, runs on A (A's events, A's
// answer); B lists the agent with its node; a local agent of the same id
// wins over the remote one.
func TestRemoteExecute(t *testing.T) {
	ns := startNATS(t, -1)
	a := newNode(t, ns.ClientURL(), "node-a", patient, map[string]agent.Model{"echo": provider.EchoModel{}, "shared": provider.EchoModel{}})
	b := newNode(t, ns.ClientURL(), "node-b", patient, map[string]agent.Model{"shared": provider.EchoModel{}})

	eventually(t, "B lists A's echo", 5*time.Second, func() bool { return lists(b.e, "echo", "node-a") })
	info, _ := b.e.Agent("echo")
	if info.Description != "agent echo of node-a" || !info.Offline || info.Timeout != agent.DefaultTimeout {
		t.Fatalf("B's view of A's agent: %+v", info)
	}
	res, err := b.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "echo", Input: "hello from B", Source: axocoatl.SourceAPI})
	if err != nil || res.Output != "hello from B" || res.AgentID != "echo" || res.TaskID == "" {
		t.Fatalf("%+v %v", res, err)
	}
	ev, p := a.nextRun(t)
	if ev.Type != axocoatl.EventTaskCompleted || p["task_id"] != res.TaskID || p["source"] != "api" || p["output"] != "hello from B" {
		t.Fatalf("A ran %s %v, want task %s", ev.Type, p, res.TaskID)
	}
	// Local wins: B's own "shared" runs on B.
	if got, _ := b.e.Agent("shared"); got.Node != "" {
		t.Fatalf("B lists its own shared agent as %q", got.Node)
	}
	res, err = b.e.Execute(context.Background(), "shared", "mine")
	if ev, p := b.nextRun(t); err != nil || ev.Type != axocoatl.EventTaskCompleted || p["task_id"] != res.TaskID {
		t.Fatalf("shared ran elsewhere: %v %v", p, err)
	}
	select {
	case ev := <-a.local.Events():
		t.Fatalf("A ran B's local agent: %+v", ev)
	case <-time.After(100 * time.Millisecond):
	}
	// A lists B's agents too, and names only B (its own "shared" wins).
	eventually(t, "A lists nothing of B but shared", 5*time.Second, func() bool {
		as := a.e.Agents()
		return len(as) == 2 && as[0].Node == "" && as[1].Node == ""
	})
	// An unknown agent is still 404.
	if _, err := b.e.Execute(context.Background(), "nobody", "x"); !errors.Is(err, axocoatl.ErrAgentNotFound) {
		t.Fatalf("unknown agent: %v", err)
	}
}

// A cancel on B stops the run on A (its AgentFailed says canceled), and a
// deadline on B ends the run on A by the same time.
func TestCancelAndDeadlineCross(t *testing.T) {
	ns := startNATS(t, -1)
	slow := newBlocking()
	a := newNode(t, ns.ClientURL(), "node-a", patient, map[string]agent.Model{"slow": slow})
	b := newNode(t, ns.ClientURL(), "node-b", patient, nil)
	eventually(t, "B lists slow", 5*time.Second, func() bool { return lists(b.e, "slow", "node-a") })

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "slow", Input: "x", TaskID: "task-cancel"})
		done <- err
	}()
	<-slow.started // the run is going on A
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("B's call: %v", err)
	}
	ev, p := a.nextRun(t)
	if ev.Type != axocoatl.EventAgentFailed || p["task_id"] != "task-cancel" || p["canceled"] != true {
		t.Fatalf("A's run ended %s %v, want AgentFailed canceled", ev.Type, p)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "slow", Input: "x", TaskID: "task-deadline"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("B's call: %v", err)
	}
	ev, p = a.nextRun(t)
	if took := time.Since(start); ev.Type != axocoatl.EventAgentFailed || p["task_id"] != "task-deadline" || took > 2*time.Second {
		t.Fatalf("A's run ended %s %v after %s, want AgentFailed at the deadline", ev.Type, p, took)
	}
	if msg, _ := p["error"].(string); !strings.Contains(msg, "timed out") || p["canceled"] == true {
		t.Fatalf("A's run: %v, want a timeout", p)
	}
}

// A daemon that stops is out of the others' lists at once (it announces
// its departure); one whose connection dies without a word is out once
// its heartbeat expires.
func TestDepartureAndExpiry(t *testing.T) {
	ns := startNATS(t, -1)
	b := newNode(t, ns.ClientURL(), "node-b", fast, nil)
	a := newNode(t, ns.ClientURL(), "node-a", fast, map[string]agent.Model{"on-a": provider.EchoModel{}})
	c := newNode(t, ns.ClientURL(), "node-c", fast, map[string]agent.Model{"on-c": provider.EchoModel{}})
	eventually(t, "B lists both", 5*time.Second, func() bool { return lists(b.e, "on-a", "node-a") && lists(b.e, "on-c", "node-c") })

	a.close()
	took := eventually(t, "A's agent leaves B's list", 2*time.Second, func() bool { _, err := b.e.Agent("on-a"); return err != nil })
	if took >= fast.ExpireAfter { // under the expiry: the departure did it
		t.Errorf("graceful departure took %s", took)
	}
	t.Logf("graceful departure seen after %s", took)

	// C "dies": its connection goes without a departure (as a killed
	// process's would), its module never stops first.
	c.bus.Conn().Close()
	took = eventually(t, "C's agent leaves B's list", 3*time.Second, func() bool { _, err := b.e.Agent("on-c"); return err != nil })
	t.Logf("silent daemon dropped after %s (expire_after %s)", took, fast.ExpireAfter)
	if took < fast.ExpireAfter/2 {
		t.Errorf("dropped after %s: before its heartbeat could expire", took)
	}
	if peers := b.m.Peers(); len(peers) != 0 {
		t.Fatalf("B still lists %v", peers)
	}
}

// With NATS down, a task for a remote agent fails at once with
// ErrUnavailable (not a hang, not "not found"), the agent stays listed,
// and everything works again once NATS is back on the same address.
func TestNATSDownUnavailableThenRecovers(t *testing.T) {
	ns := startNATS(t, -1)
	p := ns.Addr().(*net.TCPAddr).Port
	url := ns.ClientURL()
	slow := newBlocking()
	a := newNode(t, url, "node-a", fast, map[string]agent.Model{"echo": provider.EchoModel{}, "slow": slow})
	b := newNode(t, url, "node-b", fast, nil)
	eventually(t, "B lists echo", 5*time.Second, func() bool { return lists(b.e, "echo", "node-a") })
	if _, err := b.e.Execute(context.Background(), "echo", "up"); err != nil {
		t.Fatal(err)
	}
	inFlight := make(chan error, 1)
	go func() {
		_, err := b.e.Execute(context.Background(), "slow", "across the outage")
		inFlight <- err
	}()
	<-slow.started

	ns.Shutdown()
	ns.WaitForShutdown()
	eventually(t, "B sees NATS gone", 5*time.Second, func() bool { return !b.m.Connected() })
	select {
	case err := <-inFlight: // the task's fate is unknown: 503, not a hang
		if !errors.Is(err, axocoatl.ErrUnavailable) {
			t.Fatalf("task in flight when NATS went: %v", err)
		}
		t.Logf("task in flight: %v", err)
	case <-time.After(2 * time.Second):
		t.Fatal("a task in flight when NATS went down still waits")
	}
	for range 3 {
		start := time.Now()
		_, err := b.e.Execute(context.Background(), "echo", "down")
		if !errors.Is(err, axocoatl.ErrUnavailable) || time.Since(start) > 500*time.Millisecond {
			t.Fatalf("with NATS down: %v after %s, want ErrUnavailable at once", err, time.Since(start))
		}
		t.Logf("with NATS down: %v", err)
		time.Sleep(300 * time.Millisecond) // longer than the heartbeat expiry, in all
	}
	if !lists(b.e, "echo", "node-a") {
		t.Fatal("A's agent left B's list while NATS was down (nobody could be heard)")
	}

	startNATS(t, p)
	took := eventually(t, "B recovers", 10*time.Second, func() bool {
		res, err := b.e.Execute(context.Background(), "echo", "back")
		return err == nil && res.Output == "back"
	})
	t.Logf("B's tasks reach A again %s after NATS restarted", took)
	b.close() // while NATS is up (a Bus flushes on Close)
	a.close()
}

// Two daemons host the same agent id: each task sent from a third runs
// exactly once, on one of them.
func TestOneExecutorPerTask(t *testing.T) {
	ns := startNATS(t, -1)
	a := newNode(t, ns.ClientURL(), "node-a", patient, map[string]agent.Model{"dup": provider.EchoModel{}})
	c := newNode(t, ns.ClientURL(), "node-c", patient, map[string]agent.Model{"dup": provider.EchoModel{}})
	b := newNode(t, ns.ClientURL(), "node-b", patient, nil)
	eventually(t, "B lists dup on both", 5*time.Second, func() bool { return lists(b.e, "dup", "node-a,node-c") })

	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := b.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "dup", Input: "x", TaskID: fmt.Sprintf("t%02d", i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	ran := map[string]string{}
	count := map[string]int{}
	for _, x := range []*node{a, c} {
	drain:
		for {
			select {
			case ev := <-x.local.Events():
				var p map[string]any
				_ = json.Unmarshal(ev.Payload, &p)
				id := p["task_id"].(string)
				if prev, dup := ran[id]; dup {
					t.Fatalf("task %s ran on %s and %s", id, prev, x.name)
				}
				ran[id] = x.name
				count[x.name]++
			case <-time.After(300 * time.Millisecond):
				break drain
			}
		}
	}
	if len(ran) != n {
		t.Fatalf("%d tasks ran, want %d", len(ran), n)
	}
	t.Logf("runs per daemon: %v", count)
}

// Beyond max_concurrent_runs a daemon refuses a task for another: the
// caller gets ErrUnavailable naming the bound, at once.
//
// Guards: bound cluster.max_concurrent_runs (docs/bounds.md).
func TestConcurrentRunsBound(t *testing.T) {
	ns := startNATS(t, -1)
	slow := newBlocking()
	cfg := fast
	cfg.MaxConcurrentRuns = 1
	newNode(t, ns.ClientURL(), "node-a", cfg, map[string]agent.Model{"slow": slow})
	b := newNode(t, ns.ClientURL(), "node-b", fast, nil)
	eventually(t, "B lists slow", 5*time.Second, func() bool { return lists(b.e, "slow", "node-a") })
	done := make(chan error, 1)
	go func() {
		_, err := b.e.Execute(context.Background(), "slow", "first")
		done <- err
	}()
	<-slow.started
	_, err := b.e.Execute(context.Background(), "slow", "second")
	if !errors.Is(err, axocoatl.ErrUnavailable) || !strings.Contains(err.Error(), "max_concurrent_runs") {
		t.Fatalf("second run: %v", err)
	}
	close(slow.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// toolCaller calls tool once, then answers with what the tool returned.
type toolCaller struct{ tool string }

func (m toolCaller) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == agent.RoleTool {
		return &agent.Response{Content: "tool said: " + last.Content}, nil
	}
	return &agent.Response{ToolCalls: []agent.ToolCall{{ID: "1", Name: m.tool, Arguments: json.RawMessage(`{"env":"prod"}`)}}}, nil
}

// A task sent from C to A's agent calls a gated tool on A: the approval
// raised on A is listed on C (and B) and resolved from C, and C gets the
// run's answer.
func TestApprovalAcrossDaemons(t *testing.T) {
	ns := startNATS(t, -1)
	url := ns.ClientURL()
	var gates []*approval.Module
	mk := func(name string, agents map[string]agent.Model) *node {
		n := newNode(t, url, name, patient, agents)
		g, err := approval.New(approval.Config{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.e.Use(context.Background(), g); err != nil {
			t.Fatal(err)
		}
		gates = append(gates, g)
		return n
	}
	a := mk("node-a", map[string]agent.Model{"deployer": toolCaller{tool: "deploy"}})
	if err := a.e.RegisterTool(axocoatl.Tool{Name: "deploy", Approval: "prompt", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{Content: "deployed"}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	mk("node-b", nil)
	c := mk("node-c", nil)
	eventually(t, "C lists deployer", 5*time.Second, func() bool { return lists(c.e, "deployer", "node-a") })

	done := make(chan axocoatl.Result, 1)
	go func() {
		res, err := c.e.Execute(context.Background(), "deployer", "ship it")
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	var id string
	eventually(t, "every daemon lists the approval raised on A", 5*time.Second, func() bool {
		for _, g := range gates {
			p := g.Pending()
			if len(p) != 1 || p[0].Tool != "deploy" || p[0].Arguments != `{"env":"prod"}` {
				return false
			}
			id = p[0].ApprovalID
		}
		return true
	})
	if err := gates[2].Resolve(context.Background(), id, approval.Allow, approval.Once, "test-on-c"); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.Output != "tool said: deployed" {
		t.Fatalf("C got %+v", res)
	}
	eventually(t, "the approval leaves every list", 5*time.Second, func() bool {
		for _, g := range gates {
			if len(g.Pending()) != 0 {
				return false
			}
		}
		return true
	})
}

// What a hostile or broken peer on the cluster's subjects can send is
// answered or dropped, and the cluster goes on: malformed tasks get a
// precise error, oversized or malformed announcements and bad agent ids
// are ignored, an unknown door becomes "remote".
func TestHostilePeer(t *testing.T) {
	ns := startNATS(t, -1)
	cfg := fast
	cfg.MaxAnnounceBytes = 4096
	a := newNode(t, ns.ClientURL(), "node-a", cfg, map[string]agent.Model{"echo": provider.EchoModel{}})
	peer, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()

	// Bodies that are not a task, tasks without an id or with one over the
	// bound: each answered as malformed.
	for _, body := range [][]byte{
		{},
		{0x01},
		{0x01, 0x05, 't'},              // a length beyond the body
		{0x01, 0xff, 0xff, 0xff, 0xff}, // a truncated length
		cluster.TaskBody("", "x", "api", 0, "x"),
		cluster.TaskBody(strings.Repeat("t", 300), "x", "api", 0, "x"),
	} {
		if kind, text := finalAnswer(t, peer, "ct-cluster.exec.echo", body); kind != "failed" || text != "cluster: malformed task request" {
			t.Fatalf("%q → %s %q", body, kind, text)
		}
	}
	// An unknown door is labelled remote.
	if kind, text := finalAnswer(t, peer, "ct-cluster.exec.echo", cluster.TaskBody("t4", "evil", "made-up-door", 0, "hi")); kind != "" || text != "hi" {
		t.Fatalf("an unknown door: %s %q", kind, text)
	}
	if _, p := a.nextRun(t); p["source"] != "remote" {
		t.Fatalf("source %v", p["source"])
	}

	for _, body := range []string{
		`garbage`,
		// ttl_ms at its bound (a minute): what is listed stays listed while
		// a loaded machine gets round to looking.
		`{"node":"has.dot","ttl_ms":60000,"agents":[{"id":"x1"}]}`,
		`{"node":"bad-ids","ttl_ms":60000,"agents":[{"id":"Not Valid"},{"id":"ok-one","max_iterations":-3}]}`,
		`{"node":"huge","ttl_ms":60000,"agents":[{"id":"big","description":"` + strings.Repeat("x", 5000) + `"}]}`,
		// Read after all of the above (one subscription, in order): once
		// it is listed, the others have been judged.
		`{"node":"last","ttl_ms":60000,"agents":[{"id":"sentinel"}]}`,
	} {
		if err := peer.Publish("ct-cluster.announce", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	_ = peer.Flush()
	eventually(t, "the sane part of bad-ids is listed", 30*time.Second, func() bool {
		return lists(a.e, "ok-one", "bad-ids") && lists(a.e, "sentinel", "last")
	})
	for _, id := range []string{"x1", "Not Valid", "big"} {
		if _, err := a.e.Agent(id); err == nil {
			t.Errorf("agent %q listed", id)
		}
	}
	if info, _ := a.e.Agent("ok-one"); info.MaxIterations != agent.DefaultMaxIterations {
		t.Errorf("a negative max_iterations became %d", info.MaxIterations)
	}
	// Still serving.
	if res, err := a.e.Execute(context.Background(), "echo", "alive"); err != nil || res.Output != "alive" {
		t.Fatal(res, err)
	}
}

// An approval raised while NATS is down is listed on the other daemons
// once it is back (a daemon that reconnects asks every gate to publish what
// it holds, as one that joins does).
func TestApprovalRaisedDuringOutage(t *testing.T) {
	ns := startNATS(t, -1)
	port := ns.Addr().(*net.TCPAddr).Port
	url := ns.ClientURL()
	var gates []*approval.Module
	var nodes []*node
	for _, name := range []string{"node-a", "node-b"} {
		n := newNode(t, url, name, fast, nil)
		g, err := approval.New(approval.Config{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.e.Use(context.Background(), g); err != nil {
			t.Fatal(err)
		}
		gates, nodes = append(gates, g), append(nodes, n)
	}
	a := nodes[0]
	if err := a.e.RegisterTool(axocoatl.Tool{Name: "deploy", Approval: "prompt", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{Content: "deployed"}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	eventually(t, "A sees NATS gone", 5*time.Second, func() bool { return !a.m.Connected() })

	done := make(chan axocoatl.ToolResult, 1)
	go func() {
		res, _ := a.e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "deploy", Arguments: json.RawMessage(`{"during":"outage"}`)})
		done <- res
	}()
	eventually(t, "A holds the approval", 5*time.Second, func() bool { return len(gates[0].Pending()) == 1 })
	id := gates[0].Pending()[0].ApprovalID

	startNATS(t, port)
	eventually(t, "B lists the approval raised during the outage", 10*time.Second, func() bool {
		p := gates[1].Pending()
		return len(p) == 1 && p[0].ApprovalID == id && p[0].Holder == "node-a"
	})
	if err := gates[1].Resolve(context.Background(), id, approval.Allow, approval.Once, "test-on-b"); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.IsError || res.Content != "deployed" {
		t.Fatalf("%+v", res)
	}
	for _, n := range nodes { // while NATS is up (a Bus flushes on Close)
		n.close()
	}
}

// One run per task id holds across daemons: a task sent to the daemon
// hosting the agent under the id of a task running there (its own run, or
// one it serves for another daemon) is refused with ErrTaskExists, as it
// is on the Engine that runs it, not with a failure or "unavailable" (the
// A2A door answers 409 task_exists, not 200 failed or 503).
func TestTaskIDInUseAcrossDaemons(t *testing.T) {
	ns := startNATS(t, -1)
	slow := newBlocking()
	a := newNode(t, ns.ClientURL(), "node-a", patient, map[string]agent.Model{"slow": slow})
	b := newNode(t, ns.ClientURL(), "node-b", patient, nil)
	c := newNode(t, ns.ClientURL(), "node-c", patient, nil)
	eventually(t, "B and C list slow", 5*time.Second, func() bool { return lists(b.e, "slow", "node-a") && lists(c.e, "slow", "node-a") })
	done := make(chan error, 2)
	go func() {
		_, err := a.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "slow", Input: "x", TaskID: "on-a"})
		done <- err
	}()
	<-slow.started
	if _, err := b.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "slow", Input: "x", TaskID: "on-a"}); !errors.Is(err, axocoatl.ErrTaskExists) {
		t.Errorf("a task under the id of A's own running task: %v, want ErrTaskExists", err)
	}
	go func() {
		_, err := b.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "slow", Input: "x", TaskID: "from-b"})
		done <- err
	}()
	<-slow.started
	if _, err := c.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "slow", Input: "x", TaskID: "from-b"}); !errors.Is(err, axocoatl.ErrTaskExists) {
		t.Errorf("a task under the id of one A runs for B: %v, want ErrTaskExists", err)
	}
	close(slow.release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
