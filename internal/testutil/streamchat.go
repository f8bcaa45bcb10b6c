package testutil

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// StreamingChat is an OpenAI-wire model server that streams its answer
// (Chat Completions with "stream": true, as api.openai.com does): Deltas
// text deltas Gap apart, then a usage chunk and data: [DONE]; a request
// without "stream" gets the same answer as one JSON completion. A door test
// points an openai provider at URL and checks what reaches its client
// against Text and Usage.
type StreamingChat struct {
	URL string // base URL for provider.Config.BaseURL (…/v1)
	// Deltas, Gap and Word shape every answer: Word(i) is delta i.
	Deltas int
	Gap    time.Duration
	Word   func(i int) string
	// Prompt, Completion and Cached are the usage of the final chunk.
	Prompt, Completion, Cached int64

	// Plain counts the requests that asked for no stream.
	Plain atomic.Int64

	started, finished atomic.Int64
}

// NewStreamingChat starts the server; it is closed with the test.
func NewStreamingChat(t testing.TB, deltas int, gap time.Duration) *StreamingChat {
	c := &StreamingChat{Deltas: deltas, Gap: gap, Word: func(i int) string { return fmt.Sprintf("w%d ", i) },
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
