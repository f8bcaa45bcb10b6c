package agent

import "context"

// Usage is what one model call cost in tokens, as its provider reported it
// ([Response.Usage]); summed with [Usage.Add], the cost of a run.
//
// The fields mean the same whatever the provider: InputTokens counts every
// token of the request the model read, CachedInputTokens the part of those
// served from the provider's prompt cache (so CachedInputTokens <=
// InputTokens), OutputTokens the tokens it wrote. A provider that reports
// nothing leaves all three zero; agent/provider documents what each one
// reports.
type Usage struct {
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
}

// Add returns the sum of u and v, field by field: the usage of two calls.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:       u.InputTokens + v.InputTokens,
		OutputTokens:      u.OutputTokens + v.OutputTokens,
		CachedInputTokens: u.CachedInputTokens + v.CachedInputTokens,
	}
}

// Total is InputTokens + OutputTokens (cached input tokens are part of
// InputTokens, so they are not counted twice).
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// DeltaKind says what a [Delta] carries.
type DeltaKind uint8

const (
	// DeltaText is a piece of the answer's text ([Delta.Text]).
	DeltaText DeltaKind = iota + 1
	// DeltaToolCall is the start of a tool call: [Delta.ToolCallIndex],
	// [Delta.ToolCallID] and [Delta.ToolName] are set. It comes before the
	// call's first DeltaToolArguments.
	DeltaToolCall
	// DeltaToolArguments is a piece of the JSON text of a tool call's
	// arguments ([Delta.Arguments]), for the call at [Delta.ToolCallIndex].
	DeltaToolArguments
)

// Delta is a piece of a model's answer as it is written, handed to the
// emit function of [Streamer.GenerateStream].
//
// Its strings are ordinary Go strings: a consumer may keep them (they
// alias no buffer the provider reuses). Concatenated in order, the Text of
// the DeltaText deltas is the [Response.Content] the call returns, and the
// Arguments of the DeltaToolArguments deltas of one index are the
// arguments text of [Response.ToolCalls] at that index (before it is
// compacted into JSON: spaces may differ, the value does not).
type Delta struct {
	Kind DeltaKind
	// Text of a DeltaText delta.
	Text string
	// ToolCallIndex of a tool-call delta: the call's index in
	// [Response.ToolCalls], counted from 0 in the order the calls start.
	ToolCallIndex int
	// ToolCallID and ToolName of a DeltaToolCall delta.
	ToolCallID, ToolName string
	// Arguments of a DeltaToolArguments delta.
	Arguments string
}

// Streamer is an optional capability of a [Model]: one that implements it
// can report its answer as it is written. A model that does not stream
// implements only Model; [GenerateStream] serves both.
type Streamer interface {
	// GenerateStream makes the same call as Generate and returns the same
	// *Response (text, assembled tool calls, usage) that Generate returns
	// for the same answer, calling emit with each piece as it arrives.
	//
	// emit is called sequentially, from the goroutine that called
	// GenerateStream, and never after GenerateStream returns. It must not
	// block for long: while it runs the answer is not read, and its time
	// counts against the call's own deadline (a provider's timeout bounds
	// the whole streamed call). A consumer that passes deltas to a slower
	// reader coalesces or drops them itself.
	//
	// On an error, the deltas already emitted are not taken back: they
	// were a partial answer that the returned error ends. (The providers
	// of agent/provider retry a streamed call only before its first
	// delta, so none is ever emitted twice.)
	GenerateStream(ctx context.Context, req *Request, emit func(Delta)) (*Response, error)
}

// GenerateStream calls m.GenerateStream when m is a [Streamer]. Otherwise
// it calls m.Generate and emits the whole answer once it has it: a
// DeltaText with the content (if any), then for each tool call a
// DeltaToolCall and a DeltaToolArguments with its arguments. Either way the
// deltas add up to the returned *Response, as [Streamer] promises. A nil
// emit is given no deltas.
func GenerateStream(ctx context.Context, m Model, req *Request, emit func(Delta)) (*Response, error) {
	if emit == nil {
		emit = func(Delta) {}
	}
	if s, ok := m.(Streamer); ok {
		return s.GenerateStream(ctx, req, emit)
	}
	res, err := m.Generate(ctx, req)
	if err != nil || res == nil {
		return res, err
	}
	if res.Content != "" {
		emit(Delta{Kind: DeltaText, Text: res.Content})
	}
	for i, tc := range res.ToolCalls {
		emit(Delta{Kind: DeltaToolCall, ToolCallIndex: i, ToolCallID: tc.ID, ToolName: tc.Name})
		if len(tc.Arguments) > 0 {
			emit(Delta{Kind: DeltaToolArguments, ToolCallIndex: i, Arguments: string(tc.Arguments)})
		}
	}
	return res, nil
}
