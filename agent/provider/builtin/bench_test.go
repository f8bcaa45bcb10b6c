package builtin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
	"github.com/axocoatl/axocoatl-go/secret"
)

// The cost a provider adds to one model call (its request mapping, the
// shared wire client's retry loop, body cap and error shaping), against a
// minimal hand-written net/http + encoding/json client doing the same
// exchange with the same server in the same run. The request carries a
// short conversation with one tool round and two tool definitions; the
// answer asks for a tool. A real model call takes hundreds of
// milliseconds, so what matters is whether the provider's cost is visible
// next to that. (Until the providers dropped the official SDKs, the first
// contestant was the SDK: see bench/README.md.)

func benchRequest() *agent.Request {
	schema := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	return &agent.Request{
		Model:  "m",
		System: "You are terse.",
		Messages: []agent.Message{
			{Role: agent.RoleUser, Content: "Weather in Paris and Lyon?"},
			{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "call_1", Name: "lookup", Arguments: json.RawMessage(`{"city":"Paris"}`)}}},
			{Role: agent.RoleTool, ToolCallID: "call_1", Content: "21°C, sunny"},
		},
		Tools: []agent.ToolDef{
			{Name: "lookup", Description: "looks up the weather", InputSchema: schema},
			{Name: "forecast", Description: "looks up the forecast", InputSchema: schema},
		},
	}
}

func benchServer(b *testing.B, answer string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		writeJSON(w, 200, answer)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchModel(b *testing.B, m agent.Model) {
	req := benchRequest()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := m.Generate(ctx, req)
		if err != nil || len(resp.ToolCalls) == 0 {
			b.Fatalf("Generate = %+v, %v", resp, err)
		}
	}
}

func BenchmarkGenerate(b *testing.B) {
	for _, kind := range []string{provider.OpenAI, provider.Anthropic} {
		answer, base := chatToolCalls, "/v1"
		if kind == provider.Anthropic {
			answer, base = messagesToolUse, ""
		}
		b.Run(kind+"/provider", func(b *testing.B) {
			srv := benchServer(b, answer)
			m, err := builtin.New(kind, provider.Config{BaseURL: srv.URL + base, APIKey: secret.Secret("k"), HTTPClient: srv.Client()})
			if err != nil {
				b.Fatal(err)
			}
			benchModel(b, m)
		})
		b.Run(kind+"/raw", func(b *testing.B) {
			srv := benchServer(b, answer)
			benchModel(b, &rawModel{kind: kind, url: srv.URL + base, client: srv.Client()})
		})
	}
}

// rawModel is the peer: the same wire exchange written by hand, with no
// retries, no error shaping and only the fields this runtime uses.
type rawModel struct {
	kind   string
	url    string
	client *http.Client
}

func (m *rawModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	var body any
	var path string
	if m.kind == provider.Anthropic {
		path, body = "/v1/messages", rawAnthropicBody(req)
	} else {
		path, body = "/chat/completions", rawChatBody(req)
	}
	buf, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, "POST", m.url+path, bytes.NewReader(buf))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Authorization", "Bearer k")
	resp, err := m.client.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	out := &agent.Response{}
	if m.kind == provider.Anthropic {
		var r struct {
			Content []struct {
				Type, Text, ID, Name string
				Input                json.RawMessage
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return nil, err
		}
		for _, c := range r.Content {
			switch c.Type {
			case "text":
				out.Content += c.Text
			case "tool_use":
				out.ToolCalls = append(out.ToolCalls, agent.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Input})
			}
		}
		return out, nil
	}
	var r struct {
		Choices []struct {
			Message struct {
				Content   string
				ToolCalls []struct {
					ID       string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if len(r.Choices) == 0 {
		return nil, fmt.Errorf("no choices")
	}
	out.Content = r.Choices[0].Message.Content
	for _, tc := range r.Choices[0].Message.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, agent.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(tc.Function.Arguments)})
	}
	return out, nil
}

type obj = map[string]any

func rawChatBody(req *agent.Request) obj {
	msgs := []obj{{"role": "system", "content": req.System}}
	for _, m := range req.Messages {
		switch m.Role {
		case agent.RoleAssistant:
			var calls []obj
			for _, c := range m.ToolCalls {
				calls = append(calls, obj{"id": c.ID, "type": "function", "function": obj{"name": c.Name, "arguments": string(c.Arguments)}})
			}
			msgs = append(msgs, obj{"role": "assistant", "tool_calls": calls})
		case agent.RoleTool:
			msgs = append(msgs, obj{"role": "tool", "tool_call_id": m.ToolCallID, "content": m.Content})
		default:
			msgs = append(msgs, obj{"role": string(m.Role), "content": m.Content})
		}
	}
	var tools []obj
	for _, t := range req.Tools {
		tools = append(tools, obj{"type": "function", "function": obj{"name": t.Name, "description": t.Description, "parameters": t.InputSchema}})
	}
	return obj{"model": req.Model, "messages": msgs, "tools": tools}
}

func rawAnthropicBody(req *agent.Request) obj {
	var msgs []obj
	for _, m := range req.Messages {
		switch m.Role {
		case agent.RoleAssistant:
			var blocks []obj
			for _, c := range m.ToolCalls {
				blocks = append(blocks, obj{"type": "tool_use", "id": c.ID, "name": c.Name, "input": c.Arguments})
			}
			msgs = append(msgs, obj{"role": "assistant", "content": blocks})
		case agent.RoleTool:
			msgs = append(msgs, obj{"role": "user", "content": []obj{{"type": "tool_result", "tool_use_id": m.ToolCallID, "content": m.Content}}})
		default:
			msgs = append(msgs, obj{"role": "user", "content": m.Content})
		}
	}
	var tools []obj
	for _, t := range req.Tools {
		tools = append(tools, obj{"name": t.Name, "description": t.Description, "input_schema": t.InputSchema})
	}
	return obj{"model": req.Model, "max_tokens": 4096, "system": req.System, "messages": msgs, "tools": tools}
}
