package cluster_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/cluster"
	"github.com/axocoatl/axocoatl-go/internal/clustersig"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
	"github.com/axocoatl/axocoatl-go/secret"
)

const (
	key1 = secret.Secret("cluster-test-key-one-0123456789")
	key2 = secret.Secret("cluster-test-key-two-0123456789")
)

// rejected is how many messages k refused, for every reason.
func rejected(k *clustersig.Keyring) uint64 {
	var n uint64
	for _, r := range clustersig.Reasons() {
		n += k.Rejected(r)
	}
	return n
}

// waitAnyRejected waits for k to refuse another message, for any reason
// (a forgery on a cluster subject may read as unsigned or malformed).
func waitAnyRejected(t *testing.T, what string, k *clustersig.Keyring, before uint64) {
	t.Helper()
	eventually(t, what+" refused", 10*time.Second, func() bool { return rejected(k) > before })
}

// waitRejected waits for k to refuse another message than the before it
// counted: the forgery arrived and was dropped.
func waitRejected(t *testing.T, what string, k *clustersig.Keyring, r clustersig.Reason, before uint64) {
	t.Helper()
	eventually(t, what+" refused", 10*time.Second, func() bool { return k.Rejected(r) > before })
}

// keyedCluster is node-a (echo, slow, deployer with a gated deploy tool)
// and node-c (no agents), both with key and an approval gate each, and a
// raw NATS client that has no key.
type keyedCluster struct {
	a, c     *node
	gateA    *approval.Module
	gateC    *approval.Module
	slow     *blocking
	deployed atomic.Int32
	raw      *natsgo.Conn
}

func newKeyedCluster(t *testing.T, key secret.Secret) *keyedCluster {
	ns := startNATS(t, -1)
	url := ns.ClientURL()
	k := &keyedCluster{slow: newBlocking()}
	mk := func(name string, agents map[string]agent.Model) (*node, *approval.Module) {
		n := newNodeWith(t, url, latticenats.Options{Prefix: "ct", Node: name, Key: key}, fast, agents)
		g, err := approval.New(approval.Config{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.e.Use(context.Background(), g); err != nil {
			t.Fatal(err)
		}
		return n, g
	}
	k.a, k.gateA = mk("node-a", map[string]agent.Model{"echo": provider.EchoModel{}, "slow": k.slow, "deployer": toolCaller{tool: "deploy"}})
	if err := k.a.e.RegisterTool(axocoatl.Tool{Name: "deploy", Approval: "prompt", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		k.deployed.Add(1)
		return axocoatl.ToolResult{Content: "deployed"}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	k.c, k.gateC = mk("node-c", nil)
	eventually(t, "C lists A's agents", 5*time.Second, func() bool { return lists(k.c.e, "deployer", "node-a") && lists(k.c.e, "echo", "node-a") })
	raw, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	k.raw = raw
	return k
}

// deploy starts a run of deployer from C and waits for its approval to be
// pending on A; the run's result comes on the channel.
func (k *keyedCluster) deploy(t *testing.T) (id string, done chan axocoatl.Result) {
	t.Helper()
	done = make(chan axocoatl.Result, 1)
	before := map[string]bool{}
	for _, p := range k.gateA.Pending() {
		before[p.ApprovalID] = true
	}
	go func() {
		res, err := k.c.e.Execute(context.Background(), "deployer", "ship it")
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	eventually(t, "the approval pending on A and listed on C", 10*time.Second, func() bool {
		for _, p := range k.gateA.Pending() {
			if !before[p.ApprovalID] {
				for _, q := range k.gateC.Pending() {
					if q.ApprovalID == p.ApprovalID {
						id = p.ApprovalID
						return true
					}
				}
			}
		}
		return false
	})
	return id, done
}

// runsUntil reads n's finished runs up to the one whose output is want,
// failing on one whose payload holds forbidden (a run that should not
// have happened) before it.
func runsUntil(t *testing.T, n *node, want, forbidden string) {
	t.Helper()
	for {
		ev, p := n.nextRun(t)
		if forbidden != "" && strings.Contains(string(ev.Payload), forbidden) {
			t.Fatalf("a run that must not happen: %s", ev.Payload)
		}
		if p["output"] == want {
			return
		}
	}
}

func (k *keyedCluster) pendingOnA(id string) bool {
	for _, p := range k.gateA.Pending() {
		if p.ApprovalID == id {
			return true
		}
	}
	return false
}

// With cluster.key set, what a raw NATS client without the key sends on
// the subjects docs/cluster.md names acts on nothing, and each forgery is
// counted: a forged verdict leaves the approval pending and the tool
// unrun, a forged task runs nothing and is not answered, a forged answer
// reaches no caller, a forged announcement adds no daemon.
func TestForgeriesRefused(t *testing.T) {
	k := newKeyedCluster(t, key1)
	ka, kc := k.a.m.Keyring(), k.c.m.Keyring()
	if ka == nil || ka != k.a.bus.Keyring() {
		t.Fatal("the module does not sign with its bus's keys")
	}

	t.Run("verdict", func(t *testing.T) {
		id, done := k.deploy(t)
		before := ka.Rejected(clustersig.Unsigned)
		verdict, _ := json.Marshal(map[string]any{"id": "0", "type": approval.EventVerdict, "produced_by": "approval", "timestamp": time.Now().Unix(),
			"payload": map[string]string{"verdict_id": "forged", "approval_id": id, "decision": approval.Allow, "remember": approval.Always, "resolved_by": "forger", "from": "node-c"}})
		if err := k.raw.PublishMsg(&natsgo.Msg{Subject: "ct." + approval.EventVerdict, Data: verdict,
			Header: natsgo.Header{latticenats.NodeHeader: []string{"node-c"}}}); err != nil {
			t.Fatal(err)
		}
		waitRejected(t, "the forged verdict", ka, clustersig.Unsigned, before)
		if !k.pendingOnA(id) || k.deployed.Load() != 0 {
			t.Fatalf("a forged verdict acted: pending %v, deployed %d", k.pendingOnA(id), k.deployed.Load())
		}
		if err := k.gateC.Resolve(context.Background(), id, approval.Allow, approval.Once, "test-on-c"); err != nil {
			t.Fatal(err)
		}
		if res := <-done; res.Output != "tool said: deployed" || k.deployed.Load() != 1 {
			t.Fatalf("the genuine verdict: %+v, deployed %d", res, k.deployed.Load())
		}
	})

	t.Run("task", func(t *testing.T) {
		answers, err := k.raw.SubscribeSync("forged.answers")
		if err != nil {
			t.Fatal(err)
		}
		before := rejected(ka)
		if err := k.raw.PublishRequest("ct-cluster.exec.echo", "forged.answers", cluster.TaskBody("forged-task", "node-c", "api", 0, "forged")); err != nil {
			t.Fatal(err)
		}
		waitAnyRejected(t, "the forged task", ka, before)
		// The next run on A is a genuine one: the forged task, which came
		// first, ran nothing.
		if res, err := k.c.e.Execute(context.Background(), "echo", "genuine"); err != nil || res.Output != "genuine" {
			t.Fatal(res, err)
		}
		runsUntil(t, k.a, "genuine", "forged")
		if n, _, _ := answers.Pending(); n != 0 {
			t.Fatalf("the forged task was answered (%d)", n)
		}
	})

	t.Run("replayed task", func(t *testing.T) {
		spy, err := k.raw.SubscribeSync("ct-cluster.exec.echo") // a copy of each task
		if err != nil {
			t.Fatal(err)
		}
		defer spy.Unsubscribe()
		if err := k.raw.Flush(); err != nil {
			t.Fatal(err)
		}
		if res, err := k.c.e.Execute(context.Background(), "echo", "once"); err != nil || res.Output != "once" {
			t.Fatal(res, err)
		}
		runsUntil(t, k.a, "once", "")
		task, err := spy.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		before := ka.Rejected(clustersig.Replayed)
		if err := k.raw.PublishMsg(&natsgo.Msg{Subject: task.Subject, Reply: task.Reply, Data: task.Data}); err != nil {
			t.Fatal(err)
		}
		waitRejected(t, "the replayed task", ka, clustersig.Replayed, before)
		if res, err := k.c.e.Execute(context.Background(), "echo", "twice"); err != nil || res.Output != "twice" {
			t.Fatal(res, err)
		}
		runsUntil(t, k.a, "twice", "once")
	})

	t.Run("answer", func(t *testing.T) {
		spy, err := k.raw.SubscribeSync("ct-cluster.exec.slow") // a copy of each task: its reply subject
		if err != nil {
			t.Fatal(err)
		}
		if err := k.raw.Flush(); err != nil {
			t.Fatal(err)
		}
		done := make(chan axocoatl.Result, 1)
		go func() {
			res, err := k.c.e.Execute(context.Background(), "slow", "wait")
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		task, err := spy.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		<-k.slow.started
		before := rejected(kc)
		if err := k.raw.Publish(task.Reply, cluster.OutputBody("forged output")); err != nil {
			t.Fatal(err)
		}
		waitAnyRejected(t, "the forged answer", kc, before)
		select {
		case res := <-done:
			t.Fatalf("the caller took an answer before the run ended: %+v", res)
		default:
		}
		close(k.slow.release)
		if res := <-done; res.Output != "released" {
			t.Fatalf("the caller got %+v", res)
		}
	})

	t.Run("announcement", func(t *testing.T) {
		before := rejected(kc)
		ann, _ := json.Marshal(map[string]any{"node": "ghost", "ttl_ms": 60000, "hello": true,
			"agents": []map[string]any{{"id": "ghost-agent", "tools": nil}, {"id": "echo", "tools": nil}}})
		if err := k.raw.Publish("ct-cluster.announce", ann); err != nil {
			t.Fatal(err)
		}
		waitAnyRejected(t, "the forged announcement", kc, before)
		if peers := k.c.m.Peers(); len(peers) != 1 || peers[0] != "node-a" {
			t.Fatalf("C's peers: %v", peers)
		}
		if _, err := k.c.e.Agent("ghost-agent"); err == nil || !lists(k.c.e, "echo", "node-a") {
			t.Fatal("a forged announcement listed an agent")
		}
	})

	// The metric counts them, by reason.
	reg := prometheus.NewRegistry()
	reg.MustRegister(k.c.bus.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var unsigned float64
	for _, mf := range mfs {
		if mf.GetName() != "axocoatl_cluster_rejected_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == "unsigned" {
				unsigned = m.GetCounter().GetValue()
			}
		}
	}
	if unsigned < 2 {
		t.Errorf("axocoatl_cluster_rejected_total{reason=\"unsigned\"} on C is %v", unsigned)
	}
}

// Guards: bound "a signed message's age" (docs/bounds.md) end to end.
// A genuine verdict, captured off the wire, is refused when replayed as
// it was, when its approval id is changed to another pending approval's,
// and when one is signed with the key but outside the 30 s window; the
// same verdict signed now is applied (the test can tell).
func TestVerdictReplayRefused(t *testing.T) {
	k := newKeyedCluster(t, key1)
	ka := k.a.m.Keyring()
	spy, err := k.raw.SubscribeSync("ct." + approval.EventVerdict)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.raw.Flush(); err != nil {
		t.Fatal(err)
	}
	id1, done1 := k.deploy(t)
	if err := k.gateC.Resolve(context.Background(), id1, approval.Allow, approval.Once, "test-on-c"); err != nil {
		t.Fatal(err)
	}
	<-done1
	v1, err := spy.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	id2, done2 := k.deploy(t)

	replay := func(what string, m *natsgo.Msg, r clustersig.Reason) {
		t.Helper()
		before := ka.Rejected(r)
		if err := k.raw.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		waitRejected(t, what, ka, r, before)
		if !k.pendingOnA(id2) || k.deployed.Load() != 1 {
			t.Fatalf("%s acted: pending %v, deployed %d", what, k.pendingOnA(id2), k.deployed.Load())
		}
	}
	replay("the verdict replayed", &natsgo.Msg{Subject: v1.Subject, Data: v1.Data, Header: v1.Header}, clustersig.Replayed)
	other := []byte(strings.ReplaceAll(string(v1.Data), id1, id2))
	replay("the verdict replayed for another approval", &natsgo.Msg{Subject: v1.Subject, Data: other, Header: v1.Header}, clustersig.BadMAC)

	holder, err := clustersig.New(key1, nil, nil) // a key holder's
	if err != nil {
		t.Fatal(err)
	}
	late := &natsgo.Msg{Subject: v1.Subject, Data: other, Header: natsgo.Header{latticenats.NodeHeader: []string{"node-c"}}}
	holder.SignAt(late, time.Now().Add(-clustersig.Window-time.Second))
	replay("a verdict signed before the window", late, clustersig.Stale)

	fresh := &natsgo.Msg{Subject: v1.Subject, Data: other, Header: natsgo.Header{latticenats.NodeHeader: []string{"node-c"}}}
	holder.Sign(fresh)
	if err := k.raw.PublishMsg(fresh); err != nil {
		t.Fatal(err)
	}
	if res := <-done2; res.Output != "tool said: deployed" || k.deployed.Load() != 2 {
		t.Fatalf("the verdict signed now: %+v, deployed %d", res, k.deployed.Load())
	}
}

// Three daemons change the cluster key one restart at a time: each
// restarts holding the old key and accepting the new, then each holding
// the new and accepting the old, then the new only. Tasks run between
// every two daemons that are up all along, and after each restart between
// the restarted one and the others: none fails.
func TestKeyRotationNoFailedTask(t *testing.T) {
	ns := startNATS(t, -1)
	url := ns.ClientURL()
	const n = 3
	agentOf := func(i int) string { return "agent-" + string(rune('a'+i)) }
	nameOf := func(i int) string { return "node-" + string(rune('a'+i)) }
	start := func(i int, key secret.Secret, accepted []secret.Secret) *node {
		return newNodeWith(t, url, latticenats.Options{Prefix: "ct", Node: nameOf(i), Key: key, AcceptedKeys: accepted},
			fast, map[string]agent.Model{agentOf(i): provider.EchoModel{}})
	}
	var (
		locks  [n]sync.RWMutex
		nodes  [n]*node
		ok     atomic.Int64
		failed atomic.Int64
		errMu  sync.Mutex
		errs   []string
	)
	for i := range n {
		nodes[i] = start(i, key1, nil)
	}
	joined := func(i int) {
		eventually(t, nameOf(i)+" and the others list each other", 10*time.Second, func() bool {
			for j := range n {
				if j != i && (!lists(nodes[j].e, agentOf(i), nameOf(i)) || !lists(nodes[i].e, agentOf(j), nameOf(j))) {
					return false
				}
			}
			return true
		})
	}
	for i := range n {
		joined(i)
	}
	call := func(i, j int) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := nodes[i].e.Execute(ctx, agentOf(j), "rotate")
		if err != nil || res.Output != "rotate" {
			failed.Add(1)
			errMu.Lock()
			errs = append(errs, nameOf(i)+"→"+agentOf(j)+": "+res.Output+" "+errString(err))
			errMu.Unlock()
			return
		}
		ok.Add(1)
	}
	stop := make(chan struct{})
	var load sync.WaitGroup
	for i := range n {
		for j := range n {
			if i == j {
				continue
			}
			load.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					// A pair with a daemon restarting waits for it (the
					// lock of the lower index first: no deadlock).
					lo, hi := min(i, j), max(i, j)
					locks[lo].RLock()
					locks[hi].RLock()
					call(i, j)
					locks[hi].RUnlock()
					locks[lo].RUnlock()
				}
			})
		}
	}
	steps := []struct {
		key      secret.Secret
		accepted []secret.Secret
	}{
		{key1, []secret.Secret{key2}},
		{key2, []secret.Secret{key1}},
		{key2, nil},
	}
	for _, step := range steps {
		for i := range n {
			before := ok.Load()
			locks[i].Lock() // the tasks of i's pairs end; the other pair goes on
			nodes[i].close()
			nodes[i] = start(i, step.key, step.accepted)
			joined(i)
			locks[i].Unlock()
			eventually(t, "tasks run after "+nameOf(i)+" restarted", 20*time.Second, func() bool { return ok.Load() >= before+20 })
			for j := range n {
				if j != i {
					call(i, j)
					call(j, i)
				}
			}
		}
	}
	close(stop)
	load.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d tasks failed: %v", failed.Load(), failed.Load()+ok.Load(), errs[:min(len(errs), 5)])
	}
	for i := range n {
		if k := nodes[i].m.Keyring(); k.KeyID() != clustersig.KeyID(key2.Reveal()) || rejected(k) != 0 {
			t.Errorf("%s: key %s, refused %d", nameOf(i), k.KeyID(), rejected(k))
		}
	}
	t.Logf("%d tasks, none failed", ok.Load())
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A streamed run between two daemons with a key: every 'E' frame is
// signed and checked, the caller gets the deltas and the whole text, and
// nothing genuine is refused.
func TestSignedStreamAcrossDaemons(t *testing.T) {
	chat := testutil.NewStreamingChat(t, 200, time.Millisecond)
	ns := startNATS(t, -1)
	model, err := builtin.New(chat.Wire, provider.Config{BaseURL: chat.URL, APIKey: "sk-test", Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b := newNodeWith(t, ns.ClientURL(), latticenats.Options{Prefix: "ct", Node: "node-b", Key: key1}, patient, map[string]agent.Model{"streamer": model})
	a := newNodeWith(t, ns.ClientURL(), latticenats.Options{Prefix: "ct", Node: "node-a", Key: key1}, patient, nil)
	eventually(t, "A lists streamer on B", 10*time.Second, func() bool { return lists(a.e, "streamer", "node-b") })
	var mu sync.Mutex
	var text strings.Builder
	deltas := 0
	res, err := a.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "streamer", Input: "go", OnEvent: func(ev agent.RunEvent) {
		if ev.Kind == agent.RunDelta {
			mu.Lock()
			deltas++
			text.WriteString(ev.Delta.Text)
			mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if deltas < 2 || text.String() != chat.Text() || res.Output != chat.Text() {
		t.Fatalf("%d deltas, %d bytes streamed, output %d bytes, the model wrote %d", deltas, text.Len(), len(res.Output), len(chat.Text()))
	}
	if n := rejected(a.m.Keyring()) + rejected(b.m.Keyring()); n != 0 {
		t.Fatalf("%d genuine messages refused", n)
	}
}
