package approval_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/internal/dirlock"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// Guards: bound "a write of `approvals.json` waiting for another
// process's (`approvals.json.lock`)" (10 s, docs/bounds.md, approval).
// While another holder keeps approvals.json.lock, an "allow, remember
// always" waits 10 s for it, then applies to that call only: the call
// runs, the answer says remember "once", the log says the decision was not
// remembered, and the next call of the tool is asked about again. With the
// wait unbounded the verdict would never be answered.
func TestRememberWaitsForTheLockAtMost10s(t *testing.T) {
	dir := t.TempDir()
	held, err := dirlock.TryLock(filepath.Join(dir, approval.StoreFile+".lock")) // another process's write, stuck
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	logs := &testutil.SyncBuffer{}
	v := newEnv(t, approval.Config{DataDir: dir, Timeout: time.Minute}, axocoatl.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	var rec recorder
	if err := v.e.RegisterTool(rec.tool("mcp__files__write", "files", "")); err != nil {
		t.Fatal(err)
	}
	call := func() <-chan axocoatl.ToolResult {
		ch := make(chan axocoatl.ToolResult, 1)
		go func() {
			res, _ := v.e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__files__write", Arguments: json.RawMessage(`{}`)})
			ch <- res
		}()
		return ch
	}

	ch := call()
	req := v.next(t, approval.EventRequested)
	answered := make(chan response, 1)
	start := time.Now()
	go func() {
		answered <- v.do(t, "POST", "/api/approvals/"+req["approval_id"].(string), `{"decision":"allow","remember":"always"}`)
	}()
	var r response
	select {
	case r = <-answered:
	case <-time.After(60 * time.Second):
		t.Fatal("the verdict is still waiting for approvals.json.lock after 60s")
	}
	took := time.Since(start)
	if r.status != 200 || r.body["remember"] != "once" {
		t.Fatalf("verdict while the lock is held: %d %s, want remember once", r.status, r.raw)
	}
	if took < 10*time.Second {
		t.Fatalf("gave up on the lock after %v, want 10s", took)
	}
	if res := <-ch; res.IsError || rec.n.Load() != 1 {
		t.Fatalf("the allowed call: %+v", res)
	}
	if !strings.Contains(logs.String(), "decision not remembered; it applies to this call only") {
		t.Fatalf("no log line about the decision not remembered:\n%s", logs.String())
	}
	ch = call()
	req = v.next(t, approval.EventRequested) // asked again: nothing was remembered
	if err := v.m.Resolve(context.Background(), req["approval_id"].(string), approval.Deny, approval.Once, "test"); err != nil {
		t.Fatal(err)
	}
	if res := <-ch; !res.IsError {
		t.Fatal("a denied call ran")
	}
}
