package provider

import (
	"errors"

	"github.com/axocoatl/axocoatl-go/agent"
)

// Temporary until the OpenAI and Anthropic providers land.
func newOpenAI(kind string, cfg Config) (agent.Model, error) {
	return nil, errors.New("openai: not yet implemented")
}
func newAnthropic(cfg Config) (agent.Model, error) {
	return nil, errors.New("anthropic: not yet implemented")
}
