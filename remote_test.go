package axocoatl_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
)

// A remote agent is listed after the local ones with its node, runs through
// its RemoteRun with the door's request, is shadowed by a local agent of the
// same id, and leaves the list when removed; watchers hear of each change.
func TestRemoteAgents(t *testing.T) {
	e := newEngine(t)
	changed := make(chan struct{}, 16)
	stop := e.WatchAgents(func() { changed <- struct{}{} })
	defer stop()
	waitChange := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(5 * time.Second):
			t.Fatalf("no change reported for %s", what)
		}
	}
	if err := e.AddAgent(agent.Spec{ID: "here"}, provider.EchoModel{}); err != nil {
		t.Fatal(err)
	}
	waitChange("a local agent")

	var got axocoatl.Request
	run := func(ctx context.Context, req axocoatl.Request) (axocoatl.Result, error) {
		got = req
		return axocoatl.Result{Output: "from far: " + req.Input, Duration: time.Millisecond}, nil
	}
	remove, err := e.AddRemoteAgent(axocoatl.AgentInfo{Spec: agent.Spec{ID: "far", Description: "elsewhere"}, Node: "node-x"}, run)
	if err != nil {
		t.Fatal(err)
	}
	waitChange("a remote agent")
	as := e.Agents()
	if len(as) != 2 || as[0].ID != "here" || as[0].Node != "" || as[1].ID != "far" || as[1].Node != "node-x" || as[1].Timeout != agent.DefaultTimeout {
		t.Fatalf("agents: %+v", as)
	}
	res, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "far", Input: "hi", Source: axocoatl.SourceMCP})
	if err != nil || res.Output != "from far: hi" || res.TaskID == "" || got.TaskID != res.TaskID || got.Source != axocoatl.SourceMCP || got.AgentID != "far" {
		t.Fatalf("%+v %v (run got %+v)", res, err, got)
	}

	// A local agent of the same id wins.
	if _, err := e.AddRemoteAgent(axocoatl.AgentInfo{Spec: agent.Spec{ID: "here"}, Node: "node-x"}, run); err != nil {
		t.Fatal(err)
	}
	if a, _ := e.Agent("here"); a.Node != "" || len(e.Agents()) != 2 {
		t.Fatalf("a remote agent shadowed a local one: %+v", e.Agents())
	}
	if res, _ := e.Execute(context.Background(), "here", "local"); res.Output != "local" {
		t.Fatalf("ran %q", res.Output)
	}

	// Errors of the remote side keep their meaning.
	if _, err := e.AddRemoteAgent(axocoatl.AgentInfo{Spec: agent.Spec{ID: "down"}, Node: "node-y"}, func(context.Context, axocoatl.Request) (axocoatl.Result, error) {
		return axocoatl.Result{}, errors.Join(axocoatl.ErrUnavailable, errors.New("node-y unreachable"))
	}); err != nil {
		t.Fatal(err)
	}
	waitChange("another remote agent")
	if _, err := e.Execute(context.Background(), "down", "x"); !errors.Is(err, axocoatl.ErrUnavailable) {
		t.Fatalf("%v", err)
	}

	remove()
	waitChange("a removal")
	if _, err := e.Agent("far"); !errors.Is(err, axocoatl.ErrAgentNotFound) {
		t.Fatalf("removed agent: %v", err)
	}
	if _, err := e.Execute(context.Background(), "far", "x"); !errors.Is(err, axocoatl.ErrAgentNotFound) {
		t.Fatalf("removed agent runs: %v", err)
	}
	remove() // twice is harmless

	// Bad entries are refused.
	for _, info := range []axocoatl.AgentInfo{{Spec: agent.Spec{ID: "x"}}, {Spec: agent.Spec{ID: "Bad Id"}, Node: "n"}} {
		if _, err := e.AddRemoteAgent(info, run); err == nil {
			t.Fatalf("%+v accepted", info)
		}
	}
}

// Close cancels a remote run in flight (its RemoteRun sees ctx end) and
// ends every watch.
func TestRemoteRunEndsWithClose(t *testing.T) {
	e := axocoatl.New(axocoatl.Options{})
	e.WatchAgents(func() {}) // never stopped by the test: Close ends it (goleak checks)
	started := make(chan struct{})
	if _, err := e.AddRemoteAgent(axocoatl.AgentInfo{Spec: agent.Spec{ID: "far"}, Node: "n"}, func(ctx context.Context, req axocoatl.Request) (axocoatl.Result, error) {
		close(started)
		<-ctx.Done()
		return axocoatl.Result{}, ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := e.Execute(context.Background(), "far", "x"); done <- err }()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, axocoatl.ErrClosed) {
		t.Fatalf("remote run at Close: %v", err)
	}
}

type ctxKey struct{}

// A remote run's ctx carries the caller's values and ends with the caller's
// ctx or with Close, whether or not the caller's ctx can end (one that
// cannot is not registered with anything: see executeRemote); a context
// derived from it ends with it too.
func TestRemoteRunContext(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cancelable bool
	}{{"caller never ends", false}, {"caller cancels", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := axocoatl.New(axocoatl.Options{})
			defer e.Close(context.Background())
			started := make(chan any, 1)
			if _, err := e.AddRemoteAgent(axocoatl.AgentInfo{Spec: agent.Spec{ID: "far"}, Node: "n"}, func(ctx context.Context, req axocoatl.Request) (axocoatl.Result, error) {
				child, cancel := context.WithCancel(ctx)
				defer cancel()
				started <- ctx.Value(ctxKey{})
				<-child.Done()
				return axocoatl.Result{}, ctx.Err()
			}); err != nil {
				t.Fatal(err)
			}
			caller := context.WithValue(context.Background(), ctxKey{}, "trace-1")
			cancelCaller := func() {}
			if tc.cancelable {
				caller, cancelCaller = context.WithCancel(caller)
			}
			defer cancelCaller()
			done := make(chan error, 1)
			go func() { _, err := e.Execute(caller, "far", "x"); done <- err }()
			if v := <-started; v != "trace-1" {
				t.Fatalf("the run sees value %v", v)
			}
			if tc.cancelable {
				cancelCaller()
				if err := <-done; !errors.Is(err, context.Canceled) || errors.Is(err, axocoatl.ErrClosed) {
					t.Fatalf("after the caller's cancel: %v", err)
				}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			if err := e.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; !errors.Is(err, axocoatl.ErrClosed) {
				t.Fatalf("at Close: %v", err)
			}
		})
	}
}

// A context a remote run derives from its ctx (a timeout of its own) when
// the caller's cannot end costs no goroutine watching the Engine's: the
// run's ctx hands its AfterFunc on, as a cancelCtx would.
func TestRemoteRunDerivedContextNoGoroutine(t *testing.T) {
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	const n = 50
	extra := make(chan int, 1)
	if _, err := e.AddRemoteAgent(axocoatl.AgentInfo{Spec: agent.Spec{ID: "far"}, Node: "n"}, func(ctx context.Context, req axocoatl.Request) (axocoatl.Result, error) {
		before := runtime.NumGoroutine()
		var cancels []context.CancelFunc
		for range n {
			_, cancel := context.WithTimeout(ctx, time.Hour)
			cancels = append(cancels, cancel)
		}
		extra <- runtime.NumGoroutine() - before
		for _, c := range cancels {
			c()
		}
		return axocoatl.Result{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Execute(context.Background(), "far", "x"); err != nil {
		t.Fatal(err)
	}
	if d := <-extra; d >= n/2 {
		t.Fatalf("%d contexts derived from a remote run's ctx started %d goroutines", n, d)
	}
}

// A remote run gets the run's fan-out as its Request.OnEvent when the
// caller listens (nil when nobody does): what it reports reaches the
// caller's OnEvent in order, and FollowRun on the calling Engine joins
// it while it runs.
func TestRemoteRunEventsReachTheCaller(t *testing.T) {
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	joined := make(chan struct{})
	var sawNil bool
	run := func(ctx context.Context, req axocoatl.Request) (axocoatl.Result, error) {
		if req.OnEvent == nil {
			sawNil = true
			return axocoatl.Result{Output: "plain"}, nil
		}
		req.OnEvent(agent.RunEvent{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText, Text: "he"}})
		<-joined // a follower is on
		req.OnEvent(agent.RunEvent{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText, Text: "llo"}})
		req.OnEvent(agent.RunEvent{Kind: agent.RunModelUsage, Usage: agent.Usage{InputTokens: 1, OutputTokens: 2}})
		return axocoatl.Result{Output: "hello", Usage: agent.Usage{InputTokens: 1, OutputTokens: 2}}, nil
	}
	if _, err := e.AddRemoteAgent(axocoatl.AgentInfo{Spec: agent.Spec{ID: "far"}, Node: "node-x"}, run); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Execute(context.Background(), "far", "x"); err != nil || res.Output != "plain" || !sawNil {
		t.Fatalf("a run nobody listens to: %+v, %v (OnEvent nil: %v)", res, err, sawNil)
	}
	var text string
	var usage agent.Usage
	followed := make(chan string, 1)
	res, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "far", TaskID: "t-far", OnEvent: func(ev agent.RunEvent) {
		if ev.Kind == agent.RunModelUsage {
			usage = ev.Usage
			return
		}
		if text == "" {
			sub, err := e.FollowRun(context.Background(), "t-far")
			if err != nil {
				t.Errorf("FollowRun of a remote run: %v", err)
				close(joined)
				return
			}
			go func() {
				defer sub.Close()
				var b string
				for {
					ev, err := sub.Next(context.Background())
					if err != nil {
						followed <- b
						return
					}
					b += ev.Delta.Text
				}
			}()
			close(joined)
		}
		text += ev.Delta.Text
	}})
	if err != nil || res.Output != "hello" || text != "hello" || usage.OutputTokens != 2 {
		t.Fatalf("%+v, %v: events gave %q, usage %+v", res, err, text, usage)
	}
	if got := <-followed; got != "llo" {
		t.Fatalf("the follower got %q", got)
	}
	if _, err := e.FollowRun(context.Background(), "t-far"); !errors.Is(err, axocoatl.ErrTaskNotRunning) {
		t.Fatalf("FollowRun after the end: %v", err)
	}
}

// A remote run's caller with only an OnEventSync gets the run's fan-out
// too: the remote run is asked for its events (its OnEvent is set, its
// OnEventSync not passed on), and they reach the caller as the remote run
// reports them, not after ExecuteRequest returns.
func TestRemoteRunEventsReachOnEventSync(t *testing.T) {
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	var got string
	returned := false
	run := func(ctx context.Context, req axocoatl.Request) (axocoatl.Result, error) {
		if req.OnEvent == nil || req.OnEventSync != nil {
			return axocoatl.Result{Output: "plain"}, nil
		}
		req.OnEvent(agent.RunEvent{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText, Text: "he"}})
		if got != "he" {
			t.Errorf("after the remote run reported %q the caller had %q", "he", got)
		}
		req.OnEvent(agent.RunEvent{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText, Text: "llo"}})
		return axocoatl.Result{Output: "hello"}, nil
	}
	if _, err := e.AddRemoteAgent(axocoatl.AgentInfo{Spec: agent.Spec{ID: "far"}, Node: "node-x"}, run); err != nil {
		t.Fatal(err)
	}
	res, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "far", OnEventSync: func(ev agent.RunEvent) {
		if returned {
			t.Error("OnEventSync called after ExecuteRequest returned")
		}
		got += ev.Delta.Text
	}})
	returned = true
	if err != nil || res.Output != "hello" || got != "hello" {
		t.Fatalf("%+v, %v: events gave %q", res, err, got)
	}
}
