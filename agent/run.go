package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Run executes one task: it asks the model, runs the tool calls it asks for
// (concurrently when there are several, at most spec.MaxParallelToolCalls
// at once), feeds the results back, and repeats until the model answers
// without tools or spec.MaxIterations rounds pass. The caller bounds the
// run through ctx; zero fields of spec take their defaults
// ([Spec.WithDefaults]). Tool failures reach the model as [ToolResult]
// values; the run itself fails on the model's error, on ctx, or on
// [ErrMaxIterations], [ErrTooManyTools], [ErrTooManyToolCalls] or
// [ErrMaxTokensPerRun]. With a
// nil tools the model is offered none, and any call it asks for anyway is
// answered as not available. Run is [RunWithHistory] with no history.
func Run(ctx context.Context, spec Spec, model Model, tools Toolbox, input string) (string, error) {
	turn, err := RunWithHistory(ctx, spec, model, tools, nil, input)
	return turn.Output, err
}

// Turn is what one run added to a conversation.
type Turn struct {
	// Output is the model's final answer ("" when the run failed).
	Output string
	// Messages are the turns the run added after the user's input, in
	// order: each assistant turn that asked for tools followed by the
	// results of its calls, then the final answer (absent when the run
	// failed). A tool call is never without its result.
	Messages []Message
	// Usage is the sum of the run's model calls' [Response.Usage], also
	// when the run failed (the calls made up to the failure).
	Usage Usage
}

// RunWithHistory is [Run] continuing a conversation: the model sees
// history (earlier turns, oldest first, as the caller chose to window
// them), then input as the user's new message. The returned [Turn] holds
// what the run added, also when it failed (what happened up to the
// failure), so that a conversation can keep it. history is not modified.
func RunWithHistory(ctx context.Context, spec Spec, model Model, tools Toolbox, history []Message, input string) (Turn, error) {
	return RunObserved(ctx, spec, model, tools, history, input, nil)
}

// RunObserved is [RunWithHistory] telling observe what happens as it
// happens: each delta of the model's answers (the model is called through
// [GenerateStream], so a [Streamer] streams), each tool call started and
// finished, and each model call's usage. A nil observe costs nothing: the
// model is called with Generate, as RunWithHistory does.
func RunObserved(ctx context.Context, spec Spec, model Model, tools Toolbox, history []Message, input string, observe Observer) (Turn, error) {
	msgs := make([]Message, 0, len(history)+1+4)
	msgs = append(msgs, history...)
	msgs = append(msgs, Message{Role: RoleUser, Content: input})
	req := &Request{
		Model:    spec.Model,
		System:   spec.SystemPrompt,
		Messages: msgs,
	}
	added := func() []Message { return req.Messages[len(history)+1:] }
	if tools != nil {
		req.Tools = tools.Tools()
	}
	if l, ok := model.(ToolLimiter); ok {
		if max := l.MaxToolDefinitions(); max > 0 && len(req.Tools) > max {
			// Never cut the list: which tools the model lacks would be
			// arbitrary and nobody would know.
			return Turn{}, fmt.Errorf("%w: %d tools match the agent's tools: allow-list but its provider accepts at most %d; narrow `tools:` (for example mcp__<server>__*)",
				ErrTooManyTools, len(req.Tools), max)
		}
	}
	spec = spec.WithDefaults()
	var emit func(Delta)
	if observe != nil {
		// One closure per run, not per delta.
		emit = func(d Delta) { observe(RunEvent{Kind: RunDelta, Delta: d}) }
	}
	var used Usage
	failed := func(err error) (Turn, error) { return Turn{Messages: added(), Usage: used}, err }
	for iter := 0; ; iter++ {
		if err := ctx.Err(); err != nil {
			return failed(err)
		}
		var resp *Response
		var err error
		if observe == nil {
			resp, err = model.Generate(ctx, req)
		} else {
			resp, err = GenerateStream(ctx, model, req, emit)
		}
		if err != nil {
			return failed(err)
		}
		if resp == nil {
			return failed(errors.New("agent: the model returned neither a response nor an error"))
		}
		used = used.Add(resp.Usage)
		if observe != nil {
			observe(RunEvent{Kind: RunModelUsage, Usage: resp.Usage})
		}
		if spec.MaxTokensPerRun > 0 && used.Total() > spec.MaxTokensPerRun {
			// Checked after each call (providers report usage at its
			// end): the answer of the call that crossed the bound is not
			// used, neither its text nor its tool calls.
			return failed(fmt.Errorf("%w: the run used %d tokens (%d input, %d output) in %d model calls; max_tokens_per_run is %d",
				ErrMaxTokensPerRun, used.Total(), used.InputTokens, used.OutputTokens, iter+1, spec.MaxTokensPerRun))
		}
		if len(resp.ToolCalls) == 0 {
			req.Messages = append(req.Messages, Message{Role: RoleAssistant, Content: resp.Content})
			return Turn{Output: resp.Content, Messages: added(), Usage: used}, nil
		}
		if iter+1 >= spec.MaxIterations {
			return failed(fmt.Errorf("%w (%d)", ErrMaxIterations, spec.MaxIterations))
		}
		n := len(resp.ToolCalls)
		if hard := refuseFactor * spec.MaxToolCallsPerTurn; n > hard {
			return failed(fmt.Errorf("%w: the model asked for %d tool calls in one turn; max_tool_calls_per_turn is %d (a turn over %d fails the run)",
				ErrTooManyToolCalls, n, spec.MaxToolCallsPerTurn, hard))
		}
		results := callAll(ctx, tools, resp.ToolCalls, spec, observe)
		req.Messages = append(req.Messages, Message{Role: RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls})
		for i, call := range resp.ToolCalls {
			req.Messages = append(req.Messages, Message{
				Role:       RoleTool,
				ToolCallID: call.ID,
				Content:    results[i].Content,
				IsError:    results[i].IsError,
			})
		}
	}
}

// callAll runs the first spec.MaxToolCallsPerTurn calls, at most
// spec.MaxParallelToolCalls at once, and answers the others as refused.
// observe (when not nil) hears each call start and finish; a call not run
// is reported finished at once, failed.
func callAll(ctx context.Context, tools Toolbox, calls []ToolCall, spec Spec, observe Observer) []ToolResult {
	results := make([]ToolResult, len(calls))
	notRun := func(c ToolCall) {
		if observe != nil {
			observe(RunEvent{Kind: RunToolStarted, ToolCallID: c.ID, ToolName: c.Name})
			observe(RunEvent{Kind: RunToolFinished, ToolCallID: c.ID, ToolName: c.Name, IsError: true})
		}
	}
	if tools == nil {
		for i, c := range calls {
			results[i] = ToolResult{Content: fmt.Sprintf("tool %q is not available", c.Name), IsError: true}
			notRun(c)
		}
		return results
	}
	call := func(c ToolCall) ToolResult {
		if observe == nil {
			return tools.Call(ctx, c)
		}
		observe(RunEvent{Kind: RunToolStarted, ToolCallID: c.ID, ToolName: c.Name})
		start := time.Now()
		r := tools.Call(ctx, c)
		observe(RunEvent{Kind: RunToolFinished, ToolCallID: c.ID, ToolName: c.Name, IsError: r.IsError, Duration: time.Since(start)})
		return r
	}
	run := calls
	if len(calls) > spec.MaxToolCallsPerTurn {
		run = calls[:spec.MaxToolCallsPerTurn]
		refused := ToolResult{IsError: true, Content: fmt.Sprintf(
			"not run: this turn asked for %d tool calls and at most %d run per turn; ask for the rest in the next turn",
			len(calls), spec.MaxToolCallsPerTurn)}
		for i := len(run); i < len(calls); i++ {
			results[i] = refused
			notRun(calls[i])
		}
		if c, ok := tools.(RefusalCounter); ok {
			c.ToolCallsRefused(len(calls) - len(run))
		}
	}
	if len(run) == 1 {
		results[0] = call(run[0])
		return results
	}
	// A fixed pool of workers rather than a goroutine per call: the pool's
	// size is the bound on calls in flight.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(run), spec.MaxParallelToolCalls) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(run) {
					return
				}
				results[i] = call(run[i])
			}
		})
	}
	wg.Wait()
	return results
}
