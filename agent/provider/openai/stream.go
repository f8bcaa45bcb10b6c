package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/internal/wire"
)

// GenerateStream implements [agent.Streamer]: the same request as Generate
// with "stream": true and "stream_options": {"include_usage": true}, read
// as server-sent events: content deltas become [agent.DeltaText], each
// tool call (by its index) an [agent.DeltaToolCall] and its argument
// pieces [agent.DeltaToolArguments]; the usage comes in the last chunk and
// the answer ends with "data: [DONE]". A stream cut short before [DONE],
// an error chunk, or a chunk that is not the JSON expected fails the call
// with a [*provider.Error] saying so. A compatible server that ignores
// "stream" and answers JSON is read as Generate reads it and emitted at
// once. Bounds: those of Generate (Timeout, here for the whole stream, and
// the body limit) and the stream's own (see docs/bounds.md).
func (m *Model) GenerateStream(ctx context.Context, req *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	body, err := m.request(req)
	if err != nil {
		return nil, &provider.Error{Provider: m.kind, Message: err.Error()}
	}
	body.Stream = true
	body.StreamOptions = &struct {
		IncludeUsage bool `json:"include_usage"`
	}{IncludeUsage: true}
	return wire.StreamAnswer(ctx, m.call, "/chat/completions", body, emit,
		func(s *wire.SSE) (*agent.Response, error) { return m.readStream(s, emit) },
		func(raw []byte, res *chatResponse) (*agent.Response, error) { return m.response(raw, res) })
}

// Chat Completions chunks on the wire: only the fields this runtime uses.
type (
	chatChunk struct {
		Choices []chunkChoice   `json:"choices"`
		Usage   *chatUsage      `json:"usage"`
		Error   json.RawMessage `json:"error"`
	}
	chunkChoice struct {
		Index int `json:"index"`
		Delta struct {
			Content   string          `json:"content"`
			Refusal   string          `json:"refusal"`
			ToolCalls []chunkToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	}
	chunkToolCall struct {
		Index    wire.Index `json:"index"`
		ID       string     `json:"id"`
		Type     string     `json:"type"`
		Function struct {
			Name      string  `json:"name"`
			Arguments argText `json:"arguments"`
		} `json:"function"`
	}
)

// reset zeroes c for the next chunk, so that a field a chunk lacks is never
// the previous chunk's, but keeps the slices' arrays: the decoder fills
// them again instead of allocating new ones for every chunk.
func (c *chatChunk) reset() {
	choices := c.Choices[:cap(c.Choices)]
	for i := range choices {
		calls := choices[i].Delta.ToolCalls[:cap(choices[i].Delta.ToolCalls)]
		clear(calls)
		choices[i] = chunkChoice{}
		choices[i].Delta.ToolCalls = calls[:0]
	}
	*c = chatChunk{Choices: choices[:0]}
}

// argText is a piece of a tool call's arguments: text, as the API sends
// it, or a JSON object, as some compatible servers send whole arguments.
type argText string

func (a *argText) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '{':
		*a = argText(b)
		return nil
	case string(b) == "null":
		return nil
	}
	return json.Unmarshal(b, (*string)(a))
}

// readStream reads a Chat Completions stream into the Response Generate
// would have returned for the same answer.
func (m *Model) readStream(s *wire.SSE, emit func(agent.Delta)) (*agent.Response, error) {
	a := wire.NewAssembler(emit)
	frames := wire.NewFrames()
	c := new(chatChunk)
	var (
		slots     []slot // by wire index of a tool call
		usage     *chatUsage
		finish    string
		model     string // the first chunk's that names one
		refusal   strings.Builder
		sawChoice bool
	)
	for n := 1; ; n++ {
		name, data, err := s.Next()
		if errors.Is(err, io.EOF) {
			return nil, wire.MalformedStream("the stream ended after %d events without data: [DONE] (cut short)", n-1)
		}
		if err != nil {
			return nil, err
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			break
		}
		// An error event, as some compatible servers send one (OpenAI's
		// own chunks have no event name), or an error chunk.
		if string(name) == "error" {
			return nil, m.call.Failed(data)
		}
		c.reset()
		if err := frames.Decode(data, c); err != nil {
			return nil, wire.MalformedStream("event %d: %s", n, err)
		}
		if model == "" && n <= 2 {
			// Every chunk repeats the model: it is read from the first
			// ones, not decoded into each chunk (a string per delta).
			var named struct {
				Model string `json:"model"`
			}
			if json.Unmarshal(data, &named) == nil && named.Model != "" {
				model = named.Model
			}
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return nil, m.call.Failed(data)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		for i := range c.Choices {
			ch := &c.Choices[i]
			if ch.Index != 0 {
				continue // one answer was asked for; another is not ours
			}
			sawChoice = true
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
			if err := a.Text(ch.Delta.Content); err != nil {
				return nil, err
			}
			refusal.WriteString(ch.Delta.Refusal)
			for j := range ch.Delta.ToolCalls {
				if err := m.toolDelta(a, &slots, &ch.Delta.ToolCalls[j]); err != nil {
					return nil, err
				}
			}
		}
	}
	if !sawChoice {
		return nil, m.call.Malformed(nil, "no choices in the stream")
	}
	if finish == "length" && a.Calls() > 0 {
		return nil, m.cutShort()
	}
	if a.Content() == "" {
		if err := a.Text(refusal.String()); err != nil {
			return nil, err
		}
	}
	return &agent.Response{Content: a.Content(), ToolCalls: a.ToolCalls(), Usage: usage.usage(), Model: model, FinishReason: finish}, nil
}

// slot is the call at one wire index.
type slot struct {
	call     int  // its index in the Assembler, plus one (0: none yet)
	serverID bool // the server named it (else it has the id Generate would give it)
}

// toolDelta adds one chunk's piece of a tool call. A chunk names its call
// by index; one without an index continues the last call, or starts one if
// it has an id; a new id at an index already taken starts a new call (a
// compatible server that sends every call whole at index 0).
func (m *Model) toolDelta(a *wire.Assembler, slots *[]slot, tc *chunkToolCall) error {
	w := tc.Index.V
	if !tc.Index.OK {
		w = len(*slots) - 1
		if tc.ID != "" || w < 0 {
			w = len(*slots)
		}
	}
	if w >= wire.MaxToolCalls {
		return wire.MalformedStream("tool call index %d: more than %d tool calls in one answer", w, wire.MaxToolCalls)
	}
	for len(*slots) <= w {
		*slots = append(*slots, slot{})
	}
	sl := &(*slots)[w]
	i := sl.call - 1
	if i < 0 || (tc.ID != "" && sl.serverID && tc.ID != a.CallID(i)) {
		if tc.Type != "" && tc.Type != "function" {
			return &provider.Error{Provider: m.kind, Status: http.StatusOK, Message: fmt.Sprintf("unsupported tool call type %q", tc.Type)}
		}
		id := tc.ID
		if id == "" {
			// As Generate names a call whose server gave it no id.
			id = fmt.Sprintf("call_%d", a.Calls())
		}
		var err error
		if i, err = a.StartCall(id, tc.Function.Name); err != nil {
			return err
		}
		*sl = slot{call: i + 1, serverID: tc.ID != ""}
	}
	return a.Arguments(i, string(tc.Function.Arguments))
}

// cutShort is the failure of an answer that hit the token limit inside a
// tool call: running the call would act on arguments the model did not
// finish.
func (m *Model) cutShort() error {
	return &provider.Error{Provider: m.kind, Status: http.StatusOK,
		Message: fmt.Sprintf("the answer hit the token limit inside a tool call; raise providers.%s.max_tokens", m.kind)}
}
