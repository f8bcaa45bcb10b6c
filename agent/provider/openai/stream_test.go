package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/internal/streamtest"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
	"github.com/axocoatl/axocoatl-go/secret"
)

func newModel(t *testing.T, url string) *openai.Model {
	t.Helper()
	m, err := openai.New(provider.Config{BaseURL: url + "/v1", APIKey: secret.Secret("sk-test"), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func calls(kv ...string) []agent.ToolCall {
	var out []agent.ToolCall
	for i := 0; i < len(kv); i += 3 {
		out = append(out, agent.ToolCall{ID: kv[i], Name: kv[i+1], Arguments: json.RawMessage(kv[i+2])})
	}
	return out
}

// Recorded Chat Completions streams (testdata/*.sse) assemble into the
// Response stated here, which is also what Generate makes of the same
// answer without streaming (testdata/*.json); their deltas add up to it.
func TestStreamRecorded(t *testing.T) {
	cases := []struct {
		name string
		want agent.Response
	}{
		{"text", agent.Response{Content: "Hello! How can I help you today? 😊", Usage: agent.Usage{InputTokens: 19, OutputTokens: 10}}},
		{"cached", agent.Response{Content: "The capital of France is Paris.", Usage: agent.Usage{InputTokens: 2006, OutputTokens: 8, CachedInputTokens: 1920}}},
		{"tool_split", agent.Response{
			ToolCalls: calls("call_X1b2", "get_weather", `{"location":"Paris, France","unit":"celsius"}`),
			Usage:     agent.Usage{InputTokens: 82, OutputTokens: 18}}},
		{"parallel", agent.Response{
			ToolCalls: calls("call_Pa1", "get_weather", `{"location":"Paris"}`,
				"call_Ly2", "get_weather", `{"location":"Lyon"}`,
				"call_Tm3", "get_time", `{"timezone":"Europe/Paris"}`),
			Usage: agent.Usage{InputTokens: 110, OutputTokens: 71}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The recorded answers name their model and why they stopped.
			tc.want.Model, tc.want.FinishReason = "gpt-4o-mini-2024-07-18", map[string]string{"text": "stop", "cached": "stop", "tool_split": "tool_calls", "parallel": "tool_calls"}[tc.name]
			srv := streamtest.Serve(t, tc.name+".sse")
			var rec streamtest.Recorder
			got, err := newModel(t, srv.URL).GenerateStream(context.Background(), hi(), rec.Emit)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Fatalf("stream assembled\n%s\nwant\n%s", streamtest.JSON(got), streamtest.JSON(tc.want))
			}
			streamtest.Check(t, rec.Deltas, got)
			if len(rec.Deltas) < 4 {
				t.Fatalf("%d deltas: the answer came in one piece", len(rec.Deltas))
			}

			var sent struct {
				Stream        bool `json:"stream"`
				StreamOptions struct {
					IncludeUsage bool `json:"include_usage"`
				} `json:"stream_options"`
			}
			r := srv.Requests()
			if len(r) != 1 || json.Unmarshal(r[0].Body, &sent) != nil || !sent.Stream || !sent.StreamOptions.IncludeUsage {
				t.Fatalf("request %s: want stream and stream_options.include_usage", r[0].Body)
			}
			if a := r[0].Header.Get("Accept"); a != "text/event-stream" {
				t.Fatalf("Accept %q", a)
			}

			whole := streamtest.Serve(t, tc.name+".json")
			gen, err := newModel(t, whole.URL).Generate(context.Background(), hi())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gen, got) {
				t.Fatalf("Generate gave\n%s\nthe stream\n%s", streamtest.JSON(gen), streamtest.JSON(got))
			}
			if r := whole.Requests(); strings.Contains(string(r[0].Body), `"stream"`) {
				t.Fatalf("Generate asked for a stream: %s", r[0].Body)
			}
		})
	}
}

// A stream that breaks (an error chunk, an end without [DONE]) fails the
// call with a *provider.Error that says how, after the deltas that came.
func TestStreamBroken(t *testing.T) {
	cases := []struct{ name, want, text string }{
		{"error", "openai: HTTP 200: the answer failed mid-stream: The server had an error while processing your request. Sorry about that!", "Once upon a"},
		{"truncated", "openai: HTTP 200: malformed stream: the stream ended after 5 events without data: [DONE] (cut short)", "Once upon a time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := streamtest.Serve(t, tc.name+".sse")
			var rec streamtest.Recorder
			res, err := newModel(t, srv.URL).GenerateStream(context.Background(), hi(), rec.Emit)
			if err == nil {
				t.Fatalf("succeeded: %+v", res)
			}
			var perr *provider.Error
			if !errors.As(err, &perr) || !errors.Is(err, provider.ErrProvider) || err.Error() != tc.want {
				t.Fatalf("error %q (%T), want %q", err, err, tc.want)
			}
			streamtest.Check(t, rec.Deltas, &agent.Response{Content: tc.text})
		})
	}
}

// Malformed frames fail with an error naming the event and the problem.
func TestStreamMalformedFrames(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"not JSON", "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {oops\n\n", "malformed stream: event 2: invalid JSON"},
		{"content of wrong type", "data: {\"choices\":[{\"delta\":{\"content\":7}}]}\n\n", "malformed stream: event 1: unexpected JSON"},
		{"negative tool index", "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1,\"id\":\"c\",\"function\":{\"name\":\"f\"}}]}}]}\n\n", "is not an integer"},
		{"huge tool index", "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":5000,\"id\":\"c\",\"function\":{\"name\":\"f\"}}]}}]}\n\n", "tool call index 5000: more than 1024 tool calls in one answer"},
		{"no choices", "data: {\"choices\":[]}\n\ndata: [DONE]\n\n", "malformed response: no choices in the stream"},
		{"tool type", "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"type\":\"custom\",\"function\":{\"name\":\"f\"}}]}}]}\n\n", `unsupported tool call type "custom"`},
		{"error event", "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\nevent: error\ndata: {\"message\":\"model overloaded\"}\n\n", "the answer failed mid-stream: model overloaded"},
		{"error event in text", "event: error\ndata: upstream timed out\n\n", "the answer failed mid-stream: upstream timed out"},
		{"length inside a call", "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\"}}]},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n", "hit the token limit inside a tool call"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := serveBody(t, tc.body)
			_, err := newModel(t, srv.URL).GenerateStream(context.Background(), hi(), nil)
			if err == nil || !errors.Is(err, provider.ErrProvider) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// Compatible servers differ: arguments as an object, calls without ids,
// every call whole at index 0, no index at all, a JSON answer to a stream
// request. Each assembles into what Generate makes of the same answer.
func TestStreamCompatibleServers(t *testing.T) {
	cases := []struct {
		name, body string
		want       agent.Response
	}{
		{"arguments as an object, no id",
			"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"f\",\"arguments\":{\"a\": 1}}}]}}]}\n\ndata: [DONE]\n\n",
			agent.Response{ToolCalls: calls("call_0", "f", `{"a":1}`)}},
		{"every call whole at index 0",
			"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n" +
				"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"b\",\"function\":{\"name\":\"g\",\"arguments\":\"{\\\"x\\\":2}\"}}]}}]}\n\ndata: [DONE]\n\n",
			agent.Response{ToolCalls: calls("a", "f", `{}`, "b", "g", `{"x":2}`)}},
		{"no index",
			"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\"\"}}]}}]}\n\n" +
				"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\":3}\"}}]}}]}\n\ndata: [DONE]\n\n",
			agent.Response{ToolCalls: calls("a", "f", `{"x":3}`)}},
		{"refusal",
			"data: {\"choices\":[{\"delta\":{\"refusal\":\"I can't\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"refusal\":\" help.\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
			agent.Response{Content: "I can't help.", FinishReason: "stop"}},
		{"JSON answer", "", agent.Response{Content: "Hello!", Model: "gpt-4o-mini", FinishReason: "stop"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var m *openai.Model
			if tc.body == "" {
				var auth string
				m = newModel(t, server(t, &auth).URL)
			} else {
				m = newModel(t, serveBody(t, tc.body).URL)
			}
			var rec streamtest.Recorder
			got, err := m.GenerateStream(context.Background(), hi(), rec.Emit)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Fatalf("assembled\n%s\nwant\n%s", streamtest.JSON(got), streamtest.JSON(tc.want))
			}
			streamtest.Check(t, rec.Deltas, got)
		})
	}
}

// The first delta reaches emit while the server is still writing: the
// server sends the first frames and waits for the test to see a delta
// before it sends the rest. A client that buffered the answer would never
// emit, and the server would give up after 20s.
func TestStreamFirstDeltaBeforeTheEnd(t *testing.T) {
	release := make(chan struct{})
	srv, released := streamtest.Gated(t, "text.sse", 2, release)
	var once sync.Once
	var first string
	start := time.Now()
	res, err := newModel(t, srv.URL).GenerateStream(context.Background(), hi(), func(d agent.Delta) {
		once.Do(func() {
			first = d.Text
			t.Logf("first delta %q after %v", d.Text, time.Since(start))
			close(release)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !<-released {
		t.Fatal("the server was not released by the first delta")
	}
	if first != "Hello" || res.Content != "Hello! How can I help you today? 😊" {
		t.Fatalf("first delta %q, content %q", first, res.Content)
	}
}

// serveBody answers every request with body as an event stream.
func serveBody(t *testing.T, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}
