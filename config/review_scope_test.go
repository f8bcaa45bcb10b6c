package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/coder/websocket"
)

// The WebSocket's execute answers a caller who may not run an agent as
// POST /api/agents/{id}/execute does, before any run_started: a read
// token gets 403, a token whose globs leave the agent out gets the 404
// of an agent that does not exist (no task id, no sign the agent exists).
func TestWebSocketExecuteRefusedBeforeRunStarted(t *testing.T) {
	_, srv := buildScoped(t, scopedYAML)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first := func(token, agentID string) map[string]any {
		t.Helper()
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/api/events",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		conn.SetReadLimit(8 << 20)
		b, _ := json.Marshal(map[string]any{"cmd": "execute", "agent_id": agentID, "input": "hi", "ref": "r1"})
		if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("%s execute %s: %v", token[:6], agentID, err)
			}
			var f map[string]any
			_ = json.Unmarshal(data, &f)
			switch f["kind"] {
			case "run_started", "run_error", "result":
				return f
			}
		}
	}
	status := func(f map[string]any) any { return f["status"] }
	if f := first(readerToken, "support-a"); f["kind"] != "run_error" || status(f) != float64(403) || f["task_id"] != nil {
		t.Errorf("reader's execute of support-a: %v, want run_error 403 before any run_started", f)
	}
	want := first(runnerToken, "nope")
	if f := first(runnerToken, "billing"); f["kind"] != "run_error" || status(f) != float64(404) || f["task_id"] != nil {
		t.Errorf("runner's execute of billing: %v, want run_error 404 as for %v", f, want)
	}
	if f := first(runnerToken, "support-a"); f["kind"] != "run_started" {
		t.Errorf("runner's execute of support-a: %v, want run_started", f)
	}
}

// Canceling an A2A task needs execute on every binding, as REST's POST
// :cancel does: JSON-RPC's tasks/cancel (0.3) and CancelTask (1.0) rode
// on the endpoint's read scope, so a read token could cancel others' runs.
func TestA2ACancelNeedsExecute(t *testing.T) {
	_, srv := buildScoped(t, scopedYAML)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	card, err := agentcard.NewResolver(clientWith(runnerToken)).Resolve(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	client := func(token string) *a2aclient.Client {
		c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(clientWith(token)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Destroy() })
		return c
	}
	runner, reader := client(runnerToken), client(readerToken)
	m := a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "hi"})
	m.Metadata = map[string]any{"receiver_id": "support-a"}
	res, err := runner.SendMessage(ctx, &a2a03.MessageSendParams{Message: m})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a03.Task)
	if !ok {
		t.Fatalf("send: %+v", res)
	}
	// a2a-go v0.3 keeps the error's code, not its message: invalid
	// request (the scope), not "cannot be canceled" (it was looked at).
	if _, err := reader.CancelTask(ctx, &a2a03.TaskIDParams{ID: task.ID}); !errors.Is(err, a2a03.ErrInvalidRequest) {
		t.Errorf("reader's tasks/cancel: %v, want refused for want of scope execute", err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"` + string(task.ID) + `"}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/a2a", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	resp, err := clientWith(readerToken).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Error *struct{ Message string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if out.Error == nil || !strings.Contains(out.Error.Message, "scope execute") {
		t.Errorf("reader's CancelTask: %+v, want refused for want of scope execute", out.Error)
	}
	// The runner may: its task has completed, which is what it is told.
	if _, err := runner.CancelTask(ctx, &a2a03.TaskIDParams{ID: task.ID}); !errors.Is(err, a2a03.ErrTaskNotCancelable) {
		t.Errorf("runner's tasks/cancel of a completed task: %v", err)
	}
}

// The WebSocket's ready frame lists only the commands the token may use:
// a read token is not offered execute or approve (a client, the
// dashboard among them, decides from the list whether to run over the
// socket).
func TestWebSocketReadyListsTheTokensCommands(t *testing.T) {
	_, srv := buildScoped(t, scopedYAML)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	commands := func(token string) string {
		t.Helper()
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/api/events",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		conn.SetReadLimit(8 << 20)
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Kind     string   `json:"kind"`
			Commands []string `json:"commands"`
		}
		if err := json.Unmarshal(data, &f); err != nil || f.Kind != "ready" {
			t.Fatalf("first frame %s: %v", data, err)
		}
		return strings.Join(f.Commands, ",")
	}
	for token, want := range map[string]string{
		readerToken:   "follow,unfollow",
		runnerToken:   "execute,follow,unfollow",
		approverToken: "approve,follow,unfollow",
		adminToken:    "approve,execute,follow,unfollow",
	} {
		if got := commands(token); got != want {
			t.Errorf("%s…: commands %q, want %q", token[:6], got, want)
		}
	}
}
