// Package builtin builds every provider of this module by its kind name
// ([provider.Echo], [provider.OpenAI], [provider.Ollama],
// [provider.Anthropic]), for hosts that read the kind from a config file,
// as the daemon does: [New] gives the [agent.Model], [Check] probes it,
// [DefaultModel] names the model an agent gets when it names none. A host
// that knows its provider imports that provider's package instead
// ([openai.New], [anthropic.New]) and builds nothing else.
package builtin

import (
	"context"
	"fmt"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/anthropic"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
)

// New returns the model for a provider kind ("" is echo). Its key comes
// from cfg.APIKey, else the kind's variable ([provider.EnvKey]), read now.
func New(kind string, cfg provider.Config) (agent.Model, error) {
	switch kind {
	case provider.Echo, "":
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("providers.%s.%w", provider.Echo, err)
		}
		return provider.EchoModel{}, nil
	case provider.OpenAI:
		return openai.New(cfg)
	case provider.Ollama:
		return openai.NewOllama(cfg)
	case provider.Anthropic:
		return anthropic.New(cfg)
	}
	return nil, fmt.Errorf("unknown provider %q (known: %v)", kind, provider.Kinds)
}

// Check is the `doctor` probe of a provider: one cheap authenticated call
// (GET {base}/models for openai and ollama, GET /v1/models for anthropic),
// bounded by cfg.Timeout and not retried. It returns nil when the provider
// answers, else a [*provider.Error] (errors.Is(err, provider.ErrProvider))
// whose text says what failed (status and the provider's message, a
// timeout, a refused connection) and never contains the API key. echo is
// always ok.
func Check(ctx context.Context, kind string, cfg provider.Config) error {
	m, err := New(kind, cfg)
	if err != nil {
		return err
	}
	if c, ok := m.(interface{ Check(context.Context) error }); ok {
		return c.Check(ctx)
	}
	return nil
}

// DefaultModel is the model a provider kind uses for an agent that names
// none ("" for echo, which has no model), for showing the real name.
func DefaultModel(kind string) string {
	switch kind {
	case provider.OpenAI:
		return openai.DefaultModel
	case provider.Ollama:
		return openai.DefaultOllamaModel
	case provider.Anthropic:
		return anthropic.DefaultModel
	}
	return ""
}
