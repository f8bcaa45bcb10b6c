package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// Each call ends at its own deadline, neither at the first one's nor
// never; a call that ended in time is not touched later.
//
// Guards: bound mcp_servers[].timeout (docs/bounds.md).
func TestCallDeadlines(t *testing.T) {
	c := newCalls()
	defer c.stop()
	const timeout = 200 * time.Millisecond
	firstStart := time.Now()
	first, _ := c.start(context.Background(), timeout)
	time.Sleep(100 * time.Millisecond)
	secondStart := time.Now()
	second, _ := c.start(context.Background(), timeout)
	done, doneID := c.start(context.Background(), timeout)
	c.end(doneID)

	for _, w := range []struct {
		name  string
		ctx   context.Context
		start time.Time
	}{{"first", first, firstStart}, {"second", second, secondStart}} {
		select {
		case <-w.ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s call not cancelled 5s after its deadline", w.name)
		}
		took := time.Since(w.start)
		if context.Cause(w.ctx) != errDeadline {
			t.Fatalf("%s call ended with %v, want the deadline", w.name, context.Cause(w.ctx))
		}
		if took < timeout || took > timeout+400*time.Millisecond {
			t.Fatalf("%s call ended %s after it started, want %s", w.name, took, timeout)
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

// Many calls at once, started at scattered times, some ending before their
// deadline and some not: each that overstays is cancelled at its own
// deadline, none that ended in time is, and nothing stays pending.
func TestCallDeadlinesConcurrent(t *testing.T) {
	c := newCalls()
	defer c.stop()
	const timeout = 150 * time.Millisecond
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 400 {
		wg.Go(func() {
			time.Sleep(time.Duration(i%40) * time.Millisecond)
			start := time.Now()
			ctx, id := c.start(context.Background(), timeout)
			if i%2 == 0 { // ends in time
				select {
				case <-ctx.Done():
					// Only an error before the deadline: a loaded machine
					// may keep this goroutine from running past it.
					if took := time.Since(start); took < timeout {
						errs <- fmt.Errorf("call %d cancelled after %s, before its deadline: %v", i, took, context.Cause(ctx))
					}
				case <-time.After(10 * time.Millisecond):
				}
				c.end(id)
				return
			}
			select { // overstays
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
				c.end(id)
				errs <- fmt.Errorf("call %d not cancelled 5s after its %s deadline", i, timeout)
				return
			}
			took := time.Since(start)
			c.end(id)
			// Late by up to 3 s: the deadline's timer and this goroutine
			// run when a loaded machine lets them (never is the 5 s above).
			if context.Cause(ctx) != errDeadline || took < timeout || took > timeout+3*time.Second {
				errs <- fmt.Errorf("call %d ended after %s with %v, want the deadline after %s", i, took, context.Cause(ctx), timeout)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) != 0 {
		t.Fatalf("%d calls still pending", len(c.pending))
	}
}

// A call written to a stdio child that just died fails with a broken pipe
// (or a closed file): the session is dead, and the caller must be told the
// server is down, as for any other end of its session.
func TestBrokenPipeIsSessionDead(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf(`calling "tools/call": %w`, &os.PathError{Op: "write", Path: "|1", Err: syscall.EPIPE}),
		fmt.Errorf("write: %w", os.ErrClosed),
	} {
		if !sessionDead(err) {
			t.Errorf("sessionDead(%v) = false", err)
		}
	}
	if sessionDead(errors.New("tool said no")) {
		t.Error("a tool's own error taken for a dead session")
	}
}

// A call whose server asks a question is not cut by the server's timeout
// while the question waits (held); once answered, the time that was left
// runs again, and the other calls keep their deadlines meanwhile.
func TestCallHeldWhileAsking(t *testing.T) {
	c := newCalls()
	defer c.stop()
	const timeout = 100 * time.Millisecond
	held, heldID := c.startCall(context.Background(), timeout, &callInfo{})
	defer c.end(heldID)
	other, otherID := c.start(context.Background(), timeout)
	defer c.end(otherID)
	release := c.hold(heldID)
	select {
	case <-other.Done(): // the other call's deadline still runs
	case <-time.After(10 * time.Second):
		t.Fatal("the call not held was not cut at its deadline")
	}
	select {
	case <-held.Done():
		t.Fatalf("a held call was cut: %v", context.Cause(held))
	case <-time.After(3 * timeout):
	}
	start := time.Now()
	release()
	release() // more than once is harmless
	select {
	case <-held.Done():
		if cause := context.Cause(held); cause != errDeadline {
			t.Fatalf("cause %v, want the deadline", cause)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("cut %s after release", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the released call's deadline never came")
	}
}
