package provider

import (
	"context"

	"github.com/axocoatl/axocoatl-go/agent"
)

// EchoModel is the offline, deterministic model: it answers with the last
// user message and never calls tools. It is the built-in default.
type EchoModel struct{}

// Generate implements [agent.Model].
func (EchoModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == agent.RoleUser {
			return &agent.Response{Content: req.Messages[i].Content}, nil
		}
	}
	return &agent.Response{}, nil
}

// Offline implements [agent.Offline]: the echo model reaches nothing and calls
// no tools.
func (EchoModel) Offline() bool { return true }
