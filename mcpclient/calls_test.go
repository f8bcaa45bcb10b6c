package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// Each call ends at its own deadline, not at the first one's nor at the
// timer's next tick; a call that ended in time is not touched later.
func TestCallDeadlines(t *testing.T) {
	c := newCalls()
	defer c.stop()
	const timeout = 200 * time.Millisecond
	start := time.Now()
	first, _ := c.start(context.Background(), timeout)
	time.Sleep(100 * time.Millisecond)
	second, _ := c.start(context.Background(), timeout)
	done, doneID := c.start(context.Background(), timeout)
	c.end(doneID)

	for _, w := range []struct {
		name string
		ctx  context.Context
		at   time.Duration
	}{{"first", first, timeout}, {"second", second, timeout + 100*time.Millisecond}} {
		<-w.ctx.Done()
		took := time.Since(start)
		if context.Cause(w.ctx) != errDeadline {
			t.Fatalf("%s call ended with %v, want the deadline", w.name, context.Cause(w.ctx))
		}
		if took < w.at || took > w.at+150*time.Millisecond {
			t.Fatalf("%s call ended after %s, want %s", w.name, took, w.at)
		}
	}
	if cause := context.Cause(done); cause != context.Canceled {
		t.Fatalf("a call that ended in time has cause %v", cause)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) != 0 || c.armed {
		t.Fatalf("after all calls ended: %d pending, armed %v", len(c.pending), c.armed)
	}
}

// The caller's cancellation still reaches the call.
func TestCallFollowsCaller(t *testing.T) {
	c := newCalls()
	defer c.stop()
	parent, cancel := context.WithCancel(context.Background())
	ctx, id := c.start(parent, time.Minute)
	defer c.end(id)
	cancel()
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("caller's cancellation did not reach the call")
	}
}

// Stop cancels a call in flight on a hung tool at once (a session's Close
// would otherwise wait for it) and the call says why.
func TestStopCancelsCallsInFlight(t *testing.T) {
	ts := newTestServer()
	e, m := startModule(t, Config{Servers: []ServerConfig{{Name: "mem", Dial: ts.dial, Timeout: 30 * time.Second}}}, nil)
	if err := m.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__mem__hang", Arguments: json.RawMessage(`{}`)})
		errc <- err
	}()
	<-ts.hungStarted
	start := time.Now()
	if err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Stop took %s with a call in flight", took)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrStopped) {
			t.Fatalf("call in flight at Stop: %v, want ErrStopped", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("call in flight did not end at Stop")
	}
	select {
	case <-ts.hungEnded:
	case <-time.After(3 * time.Second):
		t.Fatal("the server-side handler was not cancelled")
	}
	if _, err := e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__mem__echo"}); err == nil {
		t.Fatal("a call after Stop succeeded")
	}
}
