package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

func embeddedNATS(t *testing.T) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{DontListen: true, NoLog: true, NoSigs: true})
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

func natsBus(t *testing.T, ns *server.Server) lattice.Bus {
	t.Helper()
	b, err := latticenats.Connect("", latticenats.Options{Prefix: "approvals"}, natsgo.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// Two Engines share a lattice on an embedded nats-server: an approval
// raised on A is listed by B's GET /api/approvals and resolved through B's
// POST; a second verdict on either gets 409.
func TestTwoEnginesOnNATS(t *testing.T) {
	ns := embeddedNATS(t)
	a := newEnv(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{Bus: natsBus(t, ns)})
	b := newEnv(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{Bus: natsBus(t, ns)})
	var rec recorder
	if err := a.e.RegisterTool(rec.tool("mcp__files__write", "files", "")); err != nil {
		t.Fatal(err)
	}
	for _, decision := range []string{approval.Allow, approval.Deny} {
		before := rec.n.Load()
		done := make(chan axocoatl.ToolResult, 1)
		go func() {
			res, _ := a.e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__files__write", Arguments: json.RawMessage(`{"d":"` + decision + `"}`)})
			done <- res
		}()
		req := a.next(t, approval.EventRequested)
		id := req["approval_id"].(string)
		var listed []any
		eventually(t, "B lists A's approval", func() bool {
			r := b.do(t, "GET", "/api/approvals", "")
			listed, _ = r.body["approvals"].([]any)
			return len(listed) == 1
		})
		if p := listed[0].(map[string]any); p["approval_id"] != id || p["holder"] != req["holder"] || p["tool"] != "mcp__files__write" {
			t.Fatalf("B lists %v, want A's %v", p, req)
		}
		r := b.do(t, "POST", "/api/approvals/"+id, `{"decision":"`+decision+`"}`)
		if r.status != 200 || r.body["decision"] != decision || r.body["holder"] != req["holder"] {
			t.Fatalf("POST on B: %d %s", r.status, r.raw)
		}
		res := <-done
		if ran := rec.n.Load() - before; ran != map[string]int64{approval.Allow: 1, approval.Deny: 0}[decision] || res.IsError == (decision == approval.Allow) {
			t.Fatalf("%s through B: ran %d, %+v", decision, ran, res)
		}
		for _, v := range []*env{a, b} {
			if r := v.do(t, "POST", "/api/approvals/"+id, `{"decision":"allow"}`); r.status != 409 {
				t.Fatalf("second verdict: %d %s", r.status, r.raw)
			}
		}
		eventually(t, "B's list empties", func() bool { return len(b.m.Pending()) == 0 })
	}
}

// An Engine that joins the lattice after an approval was requested learns
// it from the holder's answer to its sync, and can resolve it.
func TestLateJoinerListsPendingApprovals(t *testing.T) {
	ns := embeddedNATS(t)
	a := newEnv(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{Bus: natsBus(t, ns)})
	var rec recorder
	if err := a.e.RegisterTool(rec.tool("t", "", "")); err != nil {
		t.Fatal(err)
	}
	done := make(chan axocoatl.ToolResult, 1)
	go func() {
		res, _ := a.e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "t", Arguments: json.RawMessage(`{"late":true}`)})
		done <- res
	}()
	req := a.next(t, approval.EventRequested)

	for i := range 2 { // two late joiners, the second within the first's reply window
		c := newEnv(t, approval.Config{}, axocoatl.Options{Bus: natsBus(t, ns)})
		eventually(t, fmt.Sprintf("late joiner %d lists A's approval", i), func() bool {
			p := c.m.Pending()
			return len(p) == 1 && p[0].ApprovalID == req["approval_id"] && p[0].Arguments == `{"late":true}`
		})
		if i == 1 {
			if r := c.do(t, "POST", "/api/approvals/"+req["approval_id"].(string), `{"decision":"allow"}`); r.status != 200 {
				t.Fatalf("%d %s", r.status, r.raw)
			}
		}
	}
	if res := <-done; res.IsError || rec.n.Load() != 1 {
		t.Fatalf("%+v", res)
	}
}

// A question held by Engine A (its MCP server asks during a call) is
// listed by B with its schema; B refuses a mismatching answer at once and
// carries a valid one to A, whose server gets it.
func TestQuestionAnsweredOnAnotherEngine(t *testing.T) {
	ns := embeddedNATS(t)
	a := newEnv(t, approval.Config{Default: approval.Allow, Timeout: time.Minute}, axocoatl.Options{Bus: natsBus(t, ns)})
	b := newEnv(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{Bus: natsBus(t, ns)})
	asker := newAskerServer()
	asker.attach(t, a.e)
	done := make(chan string, 1)
	go func() {
		res, err := a.e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__asker__book", Arguments: json.RawMessage(`{}`)})
		if err != nil {
			done <- err.Error()
			return
		}
		done <- res.Content
	}()
	q := a.next(t, approval.EventRequested)
	id := q["approval_id"].(string)
	eventually(t, "B lists the question", func() bool {
		for _, p := range b.m.Pending() {
			if p.ApprovalID == id && p.Kind == approval.KindQuestion && len(p.Schema) > 0 {
				return true
			}
		}
		return false
	})
	start := time.Now()
	if r := b.do(t, "POST", "/api/approvals/"+id, `{"decision":"allow","content":{"name":"A"}}`); r.status != 400 || time.Since(start) > 5*time.Second {
		t.Fatalf("a mismatching answer on B: %d %s after %s, want 400 at once", r.status, r.raw, time.Since(start))
	}
	if r := b.do(t, "POST", "/api/approvals/"+id, `{"decision":"allow","content":{"name":"Lin","seats":4}}`); r.status != 200 || r.body["holder"] == "" {
		t.Fatalf("a valid answer on B: %d %s", r.status, r.raw)
	}
	if got := <-done; !strings.Contains(got, "booked for Lin: 4 seats, economy") {
		t.Fatalf("call: %s", got)
	}
}
