package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// asker calls the tool "ask" once, then says what it got.
type asker struct{}

func (asker) Generate(_ context.Context, req *agent.Request) (*agent.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == agent.RoleTool {
		return &agent.Response{Content: "got " + last.Content}, nil
	}
	return &agent.Response{ToolCalls: []agent.ToolCall{{ID: "c1", Name: "ask", Arguments: json.RawMessage(`{}`)}}}, nil
}

// Guards: bound "answers to one question that do not match its schema" (mcpserver) (docs/bounds.md).
// A 2025-11-25 client's answer to a question is checked with the prompt's
// Check (the asker's own schema check) before it is taken: a bad one
// (sent raw: the go-sdk client checks its own), refused by Check or by the
// go-sdk server's own schema check, is asked again, saying why and not
// echoing the value; after maxElicitTries bad ones the
// prompter fails with ErrBadElicitAnswer.
func TestElicitationAnswerChecked(t *testing.T) {
	eng, closeUpstream := newEngine(slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(closeUpstream)
	check := func(c map[string]any) (map[string]any, error) {
		if s, _ := c["name"].(string); len(s) < 2 {
			return nil, errors.New(`"name" must be at least 2 characters`)
		}
		return map[string]any{"name": c["name"], "checked": true}, nil
	}
	promptErr := make(chan error, 4)
	if err := eng.RegisterTool(axocoatl.Tool{Name: "ask", Description: "asks", Call: func(ctx context.Context, _ axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		ans, err := axocoatl.UserPrompterFrom(ctx).PromptUser(ctx, axocoatl.UserPrompt{Message: "Who?",
			Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`), Check: check})
		if err != nil {
			promptErr <- err
			return axocoatl.ToolResult{Content: "no answer"}, nil
		}
		b, _ := json.Marshal(ans.Content)
		return axocoatl.ToolResult{Content: string(b)}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	if err := eng.AddAgent(agent.Spec{ID: "asking", Provider: provider.Echo}, asker{}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{eng: eng, srv: startServer(t, eng, mcpserver.Config{})}
	t.Cleanup(func() {
		f.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Close(ctx)
	})
	r := startRaw(t, f)
	r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{}}},"clientInfo":{"name":"raw","version":"1"}}}`)
	r.wantResult("0", "2025-11-25")
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	elicit := func() rpcReply {
		t.Helper()
		for {
			m := r.next()
			if m.Method == "elicitation/create" {
				return m
			}
			if m.Method == "" {
				err, _ := recv(promptErr, time.Second)
				t.Fatalf("a reply before the elicitation: %s (%v)", m.raw, err)
			}
		}
	}
	// Answered well the second time.
	r.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agent_asking","arguments":{"input":"go"}}}`)
	m := elicit()
	r.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"action":"accept","content":{"name":"Q"}}}`)
	m = elicit()
	var p struct {
		Params struct {
			Message string `json:"message"`
		} `json:"params"`
	}
	_ = json.Unmarshal([]byte(m.raw), &p)
	if msg := p.Params.Message; !strings.HasPrefix(msg, "Your answer was refused (") || !strings.Contains(msg, `"name" must be at least 2 characters`) || !strings.HasSuffix(msg, "Who?") || strings.Contains(msg, `"Q"`) {
		t.Fatalf("asked again with %q", msg)
	}
	// Refused by the go-sdk's own check of the schema: asked again too,
	// the value not quoted.
	r.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"action":"accept","content":{"name":57}}}`)
	m = elicit()
	_ = json.Unmarshal([]byte(m.raw), &p)
	if msg := p.Params.Message; msg != "Your answer was refused (the values do not match the requested schema). Who?" {
		t.Fatalf("asked again with %q", msg)
	}
	r.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"action":"accept","content":{"name":"Quinn"}}}`)
	r.wantResult("1", `got {\"checked\":true,\"name\":\"Quinn\"}`)

	// Never answered well: the prompter fails after maxElicitTries (3).
	r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_asking","arguments":{"input":"go"}}}`)
	for range 3 {
		m := elicit()
		r.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"action":"accept","content":{"name":"Q"}}}`)
	}
	r.wantResult("2", "got no answer")
	if err, _ := recv(promptErr, 5*time.Second); !errors.Is(err, mcpserver.ErrBadElicitAnswer) {
		t.Fatalf("the prompter's error: %v", err)
	}
}
