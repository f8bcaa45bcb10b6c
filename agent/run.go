package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Run executes one task: it asks the model, runs the tool calls it asks for
// (concurrently when there are several), feeds the results back, and repeats
// until the model answers without tools or spec.MaxIterations rounds pass.
// The caller bounds the run through ctx; spec should have its defaults applied.
func Run(ctx context.Context, spec Spec, model Model, tools Toolbox, input string) (string, error) {
	req := &Request{
		Model:    spec.Model,
		System:   spec.SystemPrompt,
		Messages: []Message{{Role: RoleUser, Content: input}},
	}
	if tools != nil {
		req.Tools = tools.Tools()
	}
	maxIter := spec.MaxIterations
	if maxIter <= 0 {
		maxIter = DefaultMaxIterations
	}
	for iter := 0; ; iter++ {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		resp, err := model.Generate(ctx, req)
		if err != nil {
			return "", err
		}
		if resp == nil {
			return "", errors.New("agent: the model returned neither a response nor an error")
		}
		if len(resp.ToolCalls) == 0 {
			return resp.Content, nil
		}
		if iter+1 >= maxIter {
			return "", fmt.Errorf("%w (%d)", ErrMaxIterations, maxIter)
		}
		req.Messages = append(req.Messages, Message{Role: RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls})
		results := callAll(ctx, tools, resp.ToolCalls)
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

func callAll(ctx context.Context, tools Toolbox, calls []ToolCall) []ToolResult {
	results := make([]ToolResult, len(calls))
	if tools == nil {
		for i, c := range calls {
			results[i] = ToolResult{Content: fmt.Sprintf("tool %q is not available", c.Name), IsError: true}
		}
		return results
	}
	if len(calls) == 1 {
		results[0] = tools.Call(ctx, calls[0])
		return results
	}
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() { results[i] = tools.Call(ctx, c) })
	}
	wg.Wait()
	return results
}
