package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/internal/wire"
)

// maxBlocks bounds the content block index of a streamed answer (text and
// tool_use blocks alike), so that an index of a billion is an error, not a
// billion slots.
const maxBlocks = 4 * wire.MaxToolCalls

// GenerateStream implements [agent.Streamer]: the same request as Generate
// with "stream": true, read as the Messages API's server-sent events:
// message_start (the input usage), content_block_start / _delta / _stop
// (text_delta pieces become [agent.DeltaText]; a tool_use block an
// [agent.DeltaToolCall] and its input_json_delta pieces
// [agent.DeltaToolArguments]; thinking and server-tool blocks are skipped,
// as Generate skips them), message_delta (stop reason, output usage),
// message_stop, ping; an error event fails the call with the API's
// message. A stream cut short before message_stop, or an event that is not
// the JSON expected, fails with a [*provider.Error] saying so. Bounds:
// those of Generate (Timeout, here for the whole stream, and the body
// limit) and the stream's own (see docs/bounds.md).
func (m *Model) GenerateStream(ctx context.Context, req *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	body, err := m.request(req)
	if err != nil {
		return nil, &provider.Error{Provider: provider.Anthropic, Message: err.Error()}
	}
	body.Stream = true
	return wire.StreamAnswer(ctx, m.call, "/v1/messages", body, emit,
		func(s *wire.SSE) (*agent.Response, error) { return m.readStream(s, emit) },
		func(raw []byte, res *messagesResponse) (*agent.Response, error) { return m.response(raw, res) })
}

// tag is the type of an event or of a delta, decoded without allocating.
type tag uint8

const (
	tagOther tag = iota
	tagMessageStart
	tagBlockStart
	tagBlockDelta
	tagBlockStop
	tagMessageDelta
	tagMessageStop
	tagPing
	tagError
	tagTextDelta
	tagInputJSONDelta
)

func (t *tag) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case `"message_start"`:
		*t = tagMessageStart
	case `"content_block_start"`:
		*t = tagBlockStart
	case `"content_block_delta"`:
		*t = tagBlockDelta
	case `"content_block_stop"`:
		*t = tagBlockStop
	case `"message_delta"`:
		*t = tagMessageDelta
	case `"message_stop"`:
		*t = tagMessageStop
	case `"ping"`:
		*t = tagPing
	case `"error"`:
		*t = tagError
	case `"text_delta"`:
		*t = tagTextDelta
	case `"input_json_delta"`:
		*t = tagInputJSONDelta
	default:
		// Event and delta types the API adds later (and thinking,
		// signature, citations deltas) are not ours to read.
		*t = tagOther
	}
	return nil
}

// streamEvent is one event of a Messages stream: only the fields this
// runtime uses. It is zeroed before each event, so that a field an event
// lacks is never the previous event's.
type streamEvent struct {
	Type    tag        `json:"type"`
	Index   wire.Index `json:"index"`
	Message *struct {
		Model string     `json:"model"`
		Usage *wireUsage `json:"usage"`
	} `json:"message"`
	ContentBlock *struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta struct {
		Type        tag    `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *wireUsage `json:"usage"`
}

// block is what a content block index holds.
type block struct {
	kind  uint8 // 0: not started, else one of the below
	call  int   // the tool call's index in the Assembler
	input json.RawMessage
}

const (
	blockText uint8 = iota + 1
	blockTool
	blockOther
)

// readStream reads a Messages stream into the Response Generate would have
// returned for the same answer.
func (m *Model) readStream(s *wire.SSE, emit func(agent.Delta)) (*agent.Response, error) {
	a := wire.NewAssembler(emit)
	frames := wire.NewFrames()
	ev := new(streamEvent) // reused: one allocation per stream, not per event
	var (
		blocks  []block
		usage   wireUsage
		stop    string
		model   string // message_start's
		started bool
	)
	for n := 1; ; n++ {
		name, data, err := s.Next()
		if errors.Is(err, io.EOF) {
			return nil, wire.MalformedStream("the stream ended after %d events without message_stop (cut short)", n-1)
		}
		if err != nil {
			return nil, err
		}
		// at names the event in errors (not built unless one is).
		at := func() string {
			if len(name) == 0 {
				return fmt.Sprintf("event %d", n)
			}
			return fmt.Sprintf("event %d (%s)", n, name)
		}
		*ev = streamEvent{}
		if err := frames.Decode(data, ev); err != nil {
			return nil, wire.MalformedStream("%s: %s", at(), err)
		}
		if ev.Type == tagOther && string(name) == "error" {
			ev.Type = tagError
		}
		var b *block
		switch ev.Type {
		case tagBlockStart, tagBlockDelta, tagBlockStop:
			if !ev.Index.OK || ev.Index.V >= maxBlocks {
				return nil, wire.MalformedStream("%s: want a content block index below %d", at(), maxBlocks)
			}
			for len(blocks) <= ev.Index.V {
				blocks = append(blocks, block{})
			}
			b = &blocks[ev.Index.V]
			if ev.Type != tagBlockStart && b.kind == 0 {
				return nil, wire.MalformedStream("%s: content block %d did not start", at(), ev.Index.V)
			}
		}
		switch ev.Type {
		case tagMessageStart:
			started = true
			if ev.Message != nil {
				usage.update(ev.Message.Usage)
				model = ev.Message.Model
			}
		case tagBlockStart:
			cb := ev.ContentBlock
			if cb == nil || b.kind != 0 {
				return nil, wire.MalformedStream("%s: want a new content block at index %d", at(), ev.Index.V)
			}
			switch cb.Type {
			case "text":
				b.kind = blockText
				if err := a.Text(cb.Text); err != nil {
					return nil, err
				}
			case "tool_use":
				b.kind, b.input = blockTool, cb.Input
				if b.call, err = a.StartCall(cb.ID, cb.Name); err != nil {
					return nil, err
				}
			default:
				b.kind = blockOther
			}
		case tagBlockDelta:
			switch {
			case ev.Delta.Type == tagTextDelta && b.kind == blockText:
				if err := a.Text(ev.Delta.Text); err != nil {
					return nil, err
				}
			case ev.Delta.Type == tagInputJSONDelta && b.kind == blockTool:
				if err := a.Arguments(b.call, ev.Delta.PartialJSON); err != nil {
					return nil, err
				}
			}
		case tagBlockStop:
			// A tool_use block whose input came whole in its start (no
			// deltas) has that input, as Generate reads it.
			if b.kind == blockTool && a.ArgumentsLen(b.call) == 0 {
				if in := b.input; len(in) > 0 && string(in) != "null" && string(in) != "{}" {
					if err := a.Arguments(b.call, string(in)); err != nil {
						return nil, err
					}
				}
			}
		case tagMessageDelta:
			if ev.Delta.StopReason != "" {
				stop = ev.Delta.StopReason
			}
			usage.update(ev.Usage)
		case tagMessageStop:
			if !started {
				return nil, wire.MalformedStream("message_stop without message_start")
			}
			if stop == "max_tokens" && a.Calls() > 0 {
				return nil, m.cutShort()
			}
			return &agent.Response{Content: a.Content(), ToolCalls: a.ToolCalls(), Usage: usage.usage(), Model: model, FinishReason: stop}, nil
		case tagError:
			return nil, m.call.Failed(data)
		}
	}
}
