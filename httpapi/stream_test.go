package httpapi

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The stream reaches the approval gate through Config.Approvals: the ready
// frame lists what is pending, approve commands are checked and handed on.
func TestEventStreamApprovalHooks(t *testing.T) {
	var mu sync.Mutex
	var resolved []string
	called := make(chan struct{}, 2)
	srv, _, _ := serveAPI(t, Config{Approvals: Approvals{
		Pending: func(context.Context) []any {
			return []any{map[string]any{"approval_id": "a1", "tool": "mcp__fs__write"}}
		},
		Resolve: func(_ context.Context, id, decision, remember string) error {
			if id != "a1" {
				return fmt.Errorf("approval %q not found", id)
			}
			mu.Lock()
			resolved = append(resolved, id+" "+decision+" "+remember)
			mu.Unlock()
			called <- struct{}{}
			return nil
		},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := dialStream(t, ctx, srv)
	if f := readFrame(t, ctx, conn); f.Kind != "ready" || len(f.PendingApprovals) != 1 || !strings.Contains(string(f.PendingApprovals[0]), `"a1"`) {
		t.Fatalf("ready %+v", f)
	}
	for _, tc := range []struct{ frame, code string }{
		{`{"cmd":"approve","approval_id":"a1","decision":"maybe"}`, "bad_request"},
		{`{"cmd":"approve","decision":"allow"}`, "bad_request"},
		{`{"cmd":"approve","approval_id":"a1","decision":"allow","remember":"forever"}`, "bad_request"},
		{`{"cmd":"approve","approval_id":"zz","decision":"deny"}`, "approval_failed"},
	} {
		conn.Write(ctx, websocket.MessageText, []byte(tc.frame))
		if f := readFrame(t, ctx, conn); f.Kind != "error" || f.Error.Code != tc.code {
			t.Fatalf("%s: %+v, want error %s", tc.frame, f, tc.code)
		}
	}
	conn.Write(ctx, websocket.MessageText, []byte(`{"cmd":"approve","approval_id":"a1","decision":"allow"}`))
	conn.Write(ctx, websocket.MessageText, []byte(`{"cmd":"approve","approval_id":"a1","decision":"deny","remember":"always"}`))
	// No reply frame on success (the module publishes ApprovalResolved):
	// wait for the two calls themselves.
	for range 2 {
		select {
		case <-called:
		case <-ctx.Done():
			t.Fatal("the approve commands did not reach Resolve")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(resolved) != 2 || resolved[0] != "a1 allow once" || resolved[1] != "a1 deny always" {
		t.Fatalf("resolved %q", resolved)
	}
}

// A question's answer (content) goes to Approvals.Answer; without one the
// client is told answers are not enabled.
func TestEventStreamAnswerHook(t *testing.T) {
	answered := make(chan string, 1)
	srv, _, _ := serveAPI(t, Config{Approvals: Approvals{
		Pending: func(context.Context) []any { return nil },
		Resolve: func(context.Context, string, string, string) error { return fmt.Errorf("not for questions") },
		Answer: func(_ context.Context, id, decision string, content map[string]any) error {
			if content["name"] == "bad" {
				return fmt.Errorf(`answer does not match the question's schema: "name" must be at least 4 characters`)
			}
			answered <- fmt.Sprint(id, " ", decision, " ", content["name"], " ", content["seats"])
			return nil
		},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := dialStream(t, ctx, srv)
	readFrame(t, ctx, conn) // ready
	conn.Write(ctx, websocket.MessageText, []byte(`{"cmd":"approve","approval_id":"q1","decision":"allow","content":{"name":"bad"}}`))
	if f := readFrame(t, ctx, conn); f.Kind != "error" || f.Error.Code != "approval_failed" || !strings.Contains(f.Error.Message, "at least 4") {
		t.Fatalf("a refused answer: %+v", f)
	}
	conn.Write(ctx, websocket.MessageText, []byte(`{"cmd":"approve","approval_id":"q1","decision":"allow","content":{"name":"Ada","seats":2}}`))
	select {
	case got := <-answered:
		if got != "q1 allow Ada 2" {
			t.Fatalf("answered %q", got)
		}
	case <-ctx.Done():
		t.Fatal("the answer did not reach Answer")
	}
}
