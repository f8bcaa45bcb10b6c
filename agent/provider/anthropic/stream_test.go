package anthropic_test

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
	"github.com/axocoatl/axocoatl-go/agent/provider/anthropic"
	"github.com/axocoatl/axocoatl-go/agent/provider/internal/streamtest"
	"github.com/axocoatl/axocoatl-go/secret"
)

func newModel(t *testing.T, url string) *anthropic.Model {
	t.Helper()
	m, err := anthropic.New(provider.Config{BaseURL: url, APIKey: secret.Secret("sk-ant-test"), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func hi() *agent.Request {
	return &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "Hi"}}}
}

func calls(kv ...string) []agent.ToolCall {
	var out []agent.ToolCall
	for i := 0; i < len(kv); i += 3 {
		out = append(out, agent.ToolCall{ID: kv[i], Name: kv[i+1], Arguments: json.RawMessage(kv[i+2])})
	}
	return out
}

// Recorded Messages streams (testdata/*.sse: pings, a thinking block, text
// and tool_use blocks, cache usage) assemble into the Response stated
// here, which is also what Generate makes of the same answer without
// streaming (testdata/*.json); their deltas add up to it.
func TestStreamRecorded(t *testing.T) {
	cases := []struct {
		name string
		want agent.Response
	}{
		{"text", agent.Response{Content: "Hello! How can I help you today? 😊", Usage: agent.Usage{InputTokens: 12, OutputTokens: 15}}},
		// input_tokens 6 + cache writes 120 + cache reads 1920.
		{"cached", agent.Response{Content: "The capital of France is Paris.", Usage: agent.Usage{InputTokens: 2046, OutputTokens: 9, CachedInputTokens: 1920}}},
		{"tool_split", agent.Response{
			Content:   "Okay, let me check the weather in Paris.",
			ToolCalls: calls("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", `{"location":"Paris, France","unit":"celsius"}`),
			Usage:     agent.Usage{InputTokens: 472, OutputTokens: 89}}},
		{"parallel", agent.Response{
			Content: "I'll look up all three.",
			ToolCalls: calls("toolu_01Pa", "get_weather", `{"location":"Paris"}`,
				"toolu_02Ly", "get_weather", `{"location":"Lyon"}`,
				"toolu_03Tm", "get_time", `{"timezone":"Europe/Paris"}`),
			Usage: agent.Usage{InputTokens: 530, OutputTokens: 160}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The recorded answers name their model and why they stopped.
			tc.want.Model, tc.want.FinishReason = "claude-sonnet-4-5-20250929", map[string]string{"text": "end_turn", "cached": "end_turn", "tool_split": "tool_use", "parallel": "tool_use"}[tc.name]
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
			if len(rec.Deltas) < 2 {
				t.Fatalf("%d deltas: the answer came in one piece", len(rec.Deltas))
			}
			var sent struct {
				Stream bool `json:"stream"`
			}
			r := srv.Requests()
			if len(r) != 1 || json.Unmarshal(r[0].Body, &sent) != nil || !sent.Stream {
				t.Fatalf("request %s: want stream", r[0].Body)
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

// A stream that breaks (an error event, an end without message_stop)
// fails the call with a *provider.Error that says how, after the deltas
// that came.
func TestStreamBroken(t *testing.T) {
	cases := []struct{ name, want, text string }{
		{"error", "anthropic: HTTP 200: the answer failed mid-stream: Overloaded", "Once upon"},
		{"truncated", "anthropic: HTTP 200: malformed stream: the stream ended after 4 events without message_stop (cut short)", "Once upon a time"},
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

// Events that break the protocol fail with an error naming the event and
// the problem; events of types this client does not know are skipped.
func TestStreamMalformedEvents(t *testing.T) {
	const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
	const stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	cases := []struct{ name, body, want string }{
		{"not JSON", start + "event: content_block_start\ndata: {\"type\":\n\n", "malformed stream: event 2 (content_block_start): invalid JSON"},
		{"delta before its block", start + "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n", "event 2: content block 0 did not start"},
		{"block without index", start + "data: {\"type\":\"content_block_start\",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n", "want a content block index below 4096"},
		{"huge block index", start + "data: {\"type\":\"content_block_start\",\"index\":4096,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n", "want a content block index below 4096"},
		{"block started twice", start + "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n", "want a new content block at index 0"},
		{"stop without start", stop, "message_stop without message_start"},
		{"max_tokens inside a call", start + "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n" +
			"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\"}}\n\n" +
			"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":4096}}\n\n" + stop, "hit max_tokens (4096) inside a tool call"},
		{"error event without a type", start + "event: error\ndata: {\"error\":{\"message\":\"gateway gave up\"}}\n\n", "the answer failed mid-stream: gateway gave up"},
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

	// Unknown events and deltas, and a tool_use whose input came whole in
	// its start, as a gateway may send it.
	body := start + "event: future_event\ndata: {\"type\":\"future_event\",\"index\":99}\n\n" +
		"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{\"a\": [1, 2]}}}\n\n" +
		"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"future_delta\",\"x\":1}}\n\n" +
		"data: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":7}}\n\n" + stop
	var rec streamtest.Recorder
	got, err := newModel(t, serveBody(t, body).URL).GenerateStream(context.Background(), hi(), rec.Emit)
	if err != nil {
		t.Fatal(err)
	}
	want := agent.Response{ToolCalls: calls("t", "f", `{"a":[1,2]}`), Usage: agent.Usage{InputTokens: 3, OutputTokens: 7}, FinishReason: "tool_use"}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("assembled\n%s\nwant\n%s", streamtest.JSON(got), streamtest.JSON(want))
	}
	streamtest.Check(t, rec.Deltas, got)
}

// The first delta reaches emit while the server is still writing: the
// server sends the first events and waits for the test to see a delta
// before it sends the rest. A client that buffered the answer would never
// emit, and the server would give up after 20s.
func TestStreamFirstDeltaBeforeTheEnd(t *testing.T) {
	release := make(chan struct{})
	srv, released := streamtest.Gated(t, "text.sse", 4, release)
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
