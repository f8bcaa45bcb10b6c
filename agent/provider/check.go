package provider

import (
	"context"
	"fmt"
)

// Check is the `doctor` probe of a provider: one cheap authenticated call
// (GET {base}/models for openai and ollama, GET /v1/models for anthropic),
// bounded by cfg.Timeout and not retried. It returns nil when the provider
// answers, else an *Error (errors.Is(err, ErrProvider)) whose text says what
// failed (status and the provider's message, a timeout, a refused
// connection) and never contains the API key. echo is always ok.
func Check(ctx context.Context, kind string, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("providers.%s.%w", kind, err)
	}
	switch kind {
	case Echo, "":
		return nil
	case OpenAI, Ollama:
		m, err := newOpenAI(kind, cfg)
		if err != nil {
			return err
		}
		return m.check(ctx)
	case Anthropic:
		m, err := newAnthropic(cfg)
		if err != nil {
			return err
		}
		return m.check(ctx)
	}
	return fmt.Errorf("unknown provider %q (known: %v)", kind, Kinds)
}
