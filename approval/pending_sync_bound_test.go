package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// Guards: bound "pending approvals per `ApprovalPending` event" (100, at
// most one answer per 250 ms; docs/bounds.md, approval). An Engine holding
// 250 pending approvals answers a late joiner's ApprovalSync with three
// ApprovalPending events of at most 100 approvals each, 250 in all; twenty
// syncs sent at once right after get one answer (two if the first came
// after 250 ms), not twenty.
func TestPendingSyncRepliesBounded(t *testing.T) {
	ns := embeddedNATS(t)
	a := newEnv(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{Bus: natsBus(t, ns)})
	var rec recorder
	if err := a.e.RegisterTool(rec.tool("t", "", "")); err != nil {
		t.Fatal(err)
	}
	const held = 250
	ctx, cancel := context.WithCancel(context.Background())
	var calls sync.WaitGroup
	defer func() { cancel(); calls.Wait() }() // withdrawn: the calls return
	for i := range held {
		calls.Go(func() {
			_, _ = a.e.CallTool(ctx, axocoatl.ToolCall{Tool: "t", Arguments: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		})
	}
	eventually(t, "A holds every approval", func() bool { return len(a.m.Pending()) == held })

	obs := natsBus(t, ns) // a late joiner, speaking on the lattice itself
	replies, err := obs.Subscribe(lattice.Filter{Types: []string{approval.EventPending}}, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer replies.Close()
	sendSyncs := func(n int) {
		t.Helper()
		for range n {
			ev, err := lattice.New(approval.EventSync, "observer", map[string]string{"from": "observer"})
			if err != nil {
				t.Fatal(err)
			}
			if err := obs.Publish(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	// read takes one answer: ApprovalPending events until held approvals
	// have come, each checked against the bound.
	read := func(what string) {
		t.Helper()
		ids := map[string]bool{}
		for len(ids) < held {
			select {
			case ev := <-replies.Events():
				var p struct {
					Approvals []struct {
						ApprovalID string `json:"approval_id"`
					} `json:"approvals"`
				}
				if err := json.Unmarshal(ev.Payload, &p); err != nil {
					t.Fatal(err)
				}
				if len(p.Approvals) == 0 || len(p.Approvals) > 100 {
					t.Fatalf("%s: an ApprovalPending event with %d approvals, want 1 to 100", what, len(p.Approvals))
				}
				for _, ap := range p.Approvals {
					if ids[ap.ApprovalID] {
						t.Fatalf("%s: approval %s twice in one answer (more than one answer?)", what, ap.ApprovalID)
					}
					ids[ap.ApprovalID] = true
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: %d of %d approvals within 20s", what, len(ids), held)
			}
		}
	}
	sendSyncs(1)
	read("the first answer")
	// Twenty syncs at once: one answer serves them all, two if the first
	// 250 ms had passed when the first sync came. Each answer lists every
	// approval; collect until a second passes quietly.
	sent := time.Now()
	sendSyncs(20)
	got, last := 0, sent
	quiet := time.NewTimer(time.Second)
	defer quiet.Stop()
	for done := false; !done; {
		select {
		case ev := <-replies.Events():
			var p struct{ Approvals []json.RawMessage }
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if len(p.Approvals) > 100 {
				t.Fatalf("an ApprovalPending event with %d approvals", len(p.Approvals))
			}
			got += len(p.Approvals)
			last = time.Now()
			quiet.Reset(time.Second)
		case <-quiet.C:
			done = true
		case <-time.After(30 * time.Second):
			t.Fatal("answers to the syncs did not stop within 30s")
		}
	}
	// At most one answer per 250 ms (syncReplyEvery): a loaded machine
	// that spreads the twenty syncs' arrival over longer gets one more per
	// 250 ms they took, never one per sync.
	allowed := 2 + int(last.Sub(sent)/(250*time.Millisecond))
	if got == 0 || got%held != 0 || got/held > allowed {
		t.Fatalf("twenty syncs at once were answered with %d approvals: %d answers of %d in %s, want 1 to %d", got, got/held, held, last.Sub(sent), allowed)
	}
	t.Logf("twenty syncs at once: %d answer(s)", got/held)
}

// Guards: bound "approvals pending on other engines tracked" (10,000,
// docs/bounds.md, approval). ApprovalPending answers from another holder
// listing 10,100 approvals: 10,000 are listed, the other 100 are not
// (counted, and logged with the limit), so what other Engines can make this
// one keep stays bounded.
func TestRemoteApprovalsTrackedBounded(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	v := newEnv(t, approval.Config{}, axocoatl.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	now := time.Now().UTC()
	const sent, tracked = 10100, 10000
	for chunk := range sent / 100 { // 101 events, within the subscription's buffer
		ps := make([]approval.PendingApproval, 100)
		for i := range ps {
			ps[i] = approval.PendingApproval{ApprovalID: fmt.Sprintf("remote-%d", chunk*100+i), AgentID: "a", Tool: "mcp__x__y", Holder: "elsewhere", RequestedAt: now, ExpiresAt: now.Add(time.Hour)}
		}
		ev, err := lattice.New(approval.EventPending, "approval", map[string]any{"holder": "elsewhere", "approvals": ps})
		if err != nil {
			t.Fatal(err)
		}
		if err := v.e.Bus().Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the limit logged", func() bool { return strings.Contains(logs.String(), "too many approvals pending on other engines") })
	eventually(t, "every answer taken", func() bool { return len(v.m.Pending()) >= tracked })
	if n := len(v.m.Pending()); n != tracked {
		t.Fatalf("%d approvals of other engines listed, want %d", n, tracked)
	}
	if !strings.Contains(logs.String(), "limit=10000") {
		t.Fatalf("the log line does not name the limit:\n%.500s", logs.String())
	}
}
