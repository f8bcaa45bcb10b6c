package testutil

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The wires a StreamingChat speaks, named as the provider kinds that read
// them (provider.OpenAI, provider.Anthropic: builtin.New(chat.Wire, cfg)
// gives the model a door test points at it).
const (
	WireOpenAI    = "openai"
	WireAnthropic = "anthropic"
)

// StreamWires are the wires a door's streaming test runs over.
var StreamWires = []string{WireOpenAI, WireAnthropic}

// StreamingChat is a model server that streams its answer on the wire Wire
// names. On the OpenAI wire (Chat Completions with "stream": true, as
// api.openai.com does): Deltas text deltas Gap apart, then a usage chunk
// and data: [DONE]. On the Anthropic wire (the Messages API with "stream":
// true, as api.anthropic.com does): message_start with the input usage, a
// ping, one text block (content_block_start, Deltas text_delta events Gap
// apart, content_block_stop), message_delta with the stop reason and the
// output usage, message_stop. A request without "stream" gets the same
// answer as one JSON completion (or message). A door test points the
// provider of kind Wire at URL and checks what reaches its client against
// Text and Usage.
type StreamingChat struct {
	URL string // base URL for provider.Config.BaseURL (…/v1)
	// Wire is WireOpenAI or WireAnthropic, fixed at construction (a
	// StreamingChat built by hand with no Wire serves the OpenAI wire, but
	// builtin.New("") is echo: set it).
	Wire string
	// Deltas, Gap and Word shape every answer: Word(i) is delta i.
	Deltas int
	Gap    time.Duration
	Word   func(i int) string
	// Prompt, Completion and Cached are the usage of the final chunk, as
	// agent.Usage counts it: Prompt is every input token, Cached of them
	// read from the cache. The Anthropic wire, which counts cache reads
	// and writes apart from input_tokens, splits Prompt into the three
	// (see anthropicUsage).
	Prompt, Completion, Cached int64

	// Plain counts the requests that asked for no stream.
	Plain atomic.Int64

	started, finished atomic.Int64
	// firstAt is when the last streamed answer's first delta was sent
	// (nil: none yet).
	firstAt atomic.Pointer[time.Time]
}

// FirstDeltaAt is when the most recent streamed answer's first text delta
// was sent: taken just before the server writes it to the connection (it
// may reach the client before the write returns); zero before any. A
// benchmark subtracts it from when its client got that delta: the time
// the door adds between the model and its client.
func (c *StreamingChat) FirstDeltaAt() time.Time {
	if t := c.firstAt.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// sentFirst records the time of a first delta, as it is written.
func (c *StreamingChat) sentFirst() {
	now := time.Now()
	c.firstAt.Store(&now)
}

// NewStreamingChat starts a server on the OpenAI wire; it is closed with
// the test.
func NewStreamingChat(t testing.TB, deltas int, gap time.Duration) *StreamingChat {
	return NewStreamingChatOn(t, WireOpenAI, deltas, gap)
}

// NewStreamingChatOn starts a server on wire (WireOpenAI or
// WireAnthropic); it is closed with the test.
func NewStreamingChatOn(t testing.TB, wire string, deltas int, gap time.Duration) *StreamingChat {
	if wire != WireOpenAI && wire != WireAnthropic {
		t.Fatalf("testutil: no streaming chat speaks the %q wire (want one of %v)", wire, StreamWires)
	}
	c := &StreamingChat{Wire: wire, Deltas: deltas, Gap: gap, Word: func(i int) string { return fmt.Sprintf("w%d ", i) },
		Prompt: 123, Completion: int64(deltas), Cached: 23}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	c.URL = srv.URL + "/v1"
	return c
}

// Text is the whole answer of one call.
func (c *StreamingChat) Text() string {
	var b strings.Builder
	for i := range c.Deltas {
		b.WriteString(c.Word(i))
	}
	return b.String()
}

// Started and Finished count the answers begun and written to their end.
func (c *StreamingChat) Started() int64  { return c.started.Load() }
func (c *StreamingChat) Finished() int64 { return c.finished.Load() }

func (c *StreamingChat) serve(w http.ResponseWriter, r *http.Request) {
	if c.Wire == WireAnthropic {
		c.serveAnthropic(w, r)
		return
	}
	c.serveOpenAI(w, r)
}

func (c *StreamingChat) serveOpenAI(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream bool `json:"stream"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, `{"error":{"message":"want a chat completion request"}}`, http.StatusBadRequest)
		return
	}
	c.started.Add(1)
	if !req.Stream {
		// A run nobody follows asks for a plain answer: the same text and
		// usage at once.
		c.Plain.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": c.Text()}, "finish_reason": "stop"}},
			"usage": map[string]any{"prompt_tokens": c.Prompt, "completion_tokens": c.Completion, "total_tokens": c.Prompt + c.Completion,
				"prompt_tokens_details": map[string]any{"cached_tokens": c.Cached}}})
		c.finished.Add(1)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(chunk any) bool {
		b, _ := json.Marshal(chunk)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// Text chunks are written by hand (testutil imports nothing of the
	// module, so not jsonio's encoder): json.Marshal of a map per delta
	// would make this server the slowest part of a 10,000-delta test.
	chunk := make([]byte, 0, 512)
	for i := range c.Deltas {
		if i > 0 && c.Gap > 0 {
			select { // the model's pace, not a synchronisation
			case <-time.After(c.Gap):
			case <-r.Context().Done():
				return
			}
		}
		chunk = append(chunk[:0], `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":`...)
		word, _ := json.Marshal(c.Word(i))
		chunk = append(chunk, word...)
		chunk = append(chunk, "},\"finish_reason\":null}]}\n\n"...)
		if i == 0 {
			c.sentFirst()
		}
		if _, err := w.Write(chunk); err != nil || rc.Flush() != nil {
			return
		}
	}
	send(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
	send(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": c.Prompt, "completion_tokens": c.Completion, "total_tokens": c.Prompt + c.Completion,
			"prompt_tokens_details": map[string]any{"cached_tokens": c.Cached}}})
	fmt.Fprint(w, "data: [DONE]\n\n")
	_ = rc.Flush()
	c.finished.Add(1)
}

// anthropicUsage is c's usage as the Messages API counts it: input_tokens
// without the cache's tokens, a few cache writes and Cached cache reads,
// so that the provider's sum is Prompt again.
func (c *StreamingChat) anthropicUsage() (input, cacheWrite, cacheRead int64) {
	cacheRead = c.Cached
	rest := c.Prompt - c.Cached
	cacheWrite = min(rest/2, 10)
	return rest - cacheWrite, cacheWrite, cacheRead
}

func (c *StreamingChat) serveAnthropic(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream bool `json:"stream"`
	}
	if r.URL.Path != "/v1/messages" || r.Header.Get("Anthropic-Version") == "" || json.NewDecoder(r.Body).Decode(&req) != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"type":"error","error":{"type":"invalid_request_error","message":"want a Messages request"}}`)
		return
	}
	c.started.Add(1)
	input, cacheWrite, cacheRead := c.anthropicUsage()
	if !req.Stream {
		c.Plain.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
			"content": []any{map[string]any{"type": "text", "text": c.Text()}}, "stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": input, "cache_creation_input_tokens": cacheWrite,
				"cache_read_input_tokens": cacheRead, "output_tokens": c.Completion}})
		c.finished.Add(1)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(event string, v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// The input usage comes first, with one output token so far; the
	// output usage comes in message_delta (cumulative), as the API sends.
	if !send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": input, "cache_creation_input_tokens": cacheWrite,
			"cache_read_input_tokens": cacheRead, "output_tokens": 1}}}) ||
		!send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}}) ||
		!send("ping", map[string]any{"type": "ping"}) {
		return
	}
	// Deltas are written by hand, as on the OpenAI wire.
	chunk := make([]byte, 0, 512)
	for i := range c.Deltas {
		if i > 0 && c.Gap > 0 {
			select { // the model's pace, not a synchronisation
			case <-time.After(c.Gap):
			case <-r.Context().Done():
				return
			}
		}
		chunk = append(chunk[:0], "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":"...)
		word, _ := json.Marshal(c.Word(i))
		chunk = append(chunk, word...)
		chunk = append(chunk, "}}\n\n"...)
		if i == 0 {
			c.sentFirst()
		}
		if _, err := w.Write(chunk); err != nil || rc.Flush() != nil {
			return
		}
	}
	if !send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}) ||
		!send("message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": c.Completion}}) ||
		!send("message_stop", map[string]any{"type": "message_stop"}) {
		return
	}
	c.finished.Add(1)
}

// EachWire runs f as a parallel subtest per wire of StreamWires, named for
// the wire: a door's streaming test runs over every wire a provider reads,
// in the time of one.
func EachWire(t *testing.T, f func(t *testing.T, wire string)) {
	t.Helper()
	for _, wire := range StreamWires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			f(t, wire)
		})
	}
}

// ModelFirstDelta is a model's own time to first delta, which a door's is
// compared with: a streamed request sent straight to the OpenAI-wire
// server at baseURL (a StreamingChat's URL) over client, to its first
// content chunk (the answer read to its end).
func ModelFirstDelta(client *http.Client, baseURL string) (time.Duration, error) {
	req, _ := http.NewRequest(http.MethodPost, baseURL+"/chat/completions", strings.NewReader(`{"model":"m1","stream":true,"messages":[{"role":"user","content":"go"}]}`))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var d time.Duration
	for sc.Scan() {
		if d == 0 && strings.Contains(sc.Text(), `"delta":{"content":`) {
			d = time.Since(start)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if d == 0 {
		return 0, fmt.Errorf("no content chunk from the model (status %d)", resp.StatusCode)
	}
	return d, nil
}
