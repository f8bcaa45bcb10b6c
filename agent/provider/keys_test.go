package provider_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/secret"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestKeyFromConfigElseVariable(t *testing.T) {
	vars := env(map[string]string{"OPENAI_API_KEY": " sk-env\n", "ANTHROPIC_API_KEY": "sk-ant-env"})
	cases := []struct {
		kind string
		cfg  provider.Config
		want secret.Secret
	}{
		{provider.OpenAI, provider.Config{LookupEnv: vars}, "sk-env"}, // trimmed: a pasted newline is no part of a key
		{provider.OpenAI, provider.Config{APIKey: "sk-cfg", LookupEnv: vars}, "sk-cfg"},
		{provider.Anthropic, provider.Config{LookupEnv: vars}, "sk-ant-env"},
		{provider.Ollama, provider.Config{LookupEnv: vars}, ""}, // never OpenAI's key
		{provider.Echo, provider.Config{LookupEnv: vars}, ""},
		{provider.OpenAI, provider.Config{LookupEnv: env(nil)}, ""},
	}
	for _, tc := range cases {
		if got := tc.cfg.Key(tc.kind); got != tc.want {
			t.Errorf("%s %+v: key %q, want %q", tc.kind, tc.cfg, got.Reveal(), tc.want.Reveal())
		}
	}
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-process")
	if got := (provider.Config{}).Key(provider.Anthropic); got != "sk-ant-process" {
		t.Errorf("zero LookupEnv: key %q, want the process environment's", got.Reveal())
	}
}

// CheckKey refuses a provider that needs a key and has none, naming the key
// and the variable; a server that may need none gets a warning.
func TestCheckKey(t *testing.T) {
	none := env(nil)
	cases := []struct {
		name, kind string
		cfg        provider.Config
		err, warn  string // "" = none
	}{
		{"openai without either", provider.OpenAI, provider.Config{LookupEnv: none},
			"providers.openai.api_key is empty and OPENAI_API_KEY is not set", ""},
		{"anthropic without either", provider.Anthropic, provider.Config{LookupEnv: none},
			"providers.anthropic.api_key is empty and ANTHROPIC_API_KEY is not set", ""},
		{"openai-compatible remote", provider.OpenAI, provider.Config{BaseURL: "https://openrouter.ai/api/v1", LookupEnv: none},
			"providers.openai.api_key is empty and OPENAI_API_KEY is not set", ""},
		{"openai from the variable", provider.OpenAI, provider.Config{LookupEnv: env(map[string]string{"OPENAI_API_KEY": "sk"})}, "", ""},
		{"openai from api_key", provider.OpenAI, provider.Config{APIKey: "sk", LookupEnv: none}, "", ""},
		{"openai-compatible on localhost", provider.OpenAI, provider.Config{BaseURL: "http://localhost:8000/v1", LookupEnv: none},
			"", "providers.openai.api_key is empty and OPENAI_API_KEY is not set: calls to localhost go without a key"},
		{"openai-compatible on loopback", provider.OpenAI, provider.Config{BaseURL: "http://127.0.0.1:1234/v1", LookupEnv: none}, "", "calls to 127.0.0.1"},
		{"openai-compatible in compose", provider.OpenAI, provider.Config{BaseURL: "http://vllm:8000/v1", LookupEnv: none}, "", "calls to vllm"},
		{"openai-compatible on the LAN", provider.OpenAI, provider.Config{BaseURL: "http://192.168.1.20:8080/v1", LookupEnv: none}, "", "calls to 192.168.1.20"},
		{"anthropic-compatible on localhost", provider.Anthropic, provider.Config{BaseURL: "http://[::1]:4000", LookupEnv: none}, "", "ANTHROPIC_API_KEY is not set: calls to ::1"},
		{"ollama local", provider.Ollama, provider.Config{LookupEnv: none}, "", ""},
		{"ollama remote", provider.Ollama, provider.Config{BaseURL: "https://ollama.example.com", LookupEnv: none},
			"", "providers.ollama.api_key is empty: calls to ollama.example.com go without a key"},
		{"echo", provider.Echo, provider.Config{LookupEnv: none}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			warn, err := provider.CheckKey(tc.kind, tc.cfg)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %q", err)
			case tc.err != "" && (err == nil || err.Error() != tc.err || !errors.Is(err, provider.ErrNoKey)):
				t.Fatalf("error %v, want ErrNoKey saying %q", err, tc.err)
			case tc.warn == "" && warn != "":
				t.Fatalf("warning %q", warn)
			case !strings.Contains(warn, tc.warn):
				t.Fatalf("warning %q, want it to say %q", warn, tc.warn)
			}
		})
	}
}

// A base URL's credentials never reach the warning.
func TestCheckKeyWarningKeepsCredentials(t *testing.T) {
	warn, err := provider.CheckKey(provider.OpenAI, provider.Config{BaseURL: "http://user:pw_secret@localhost:8000/v1?key=q_secret", LookupEnv: env(nil)})
	if err != nil || warn == "" || strings.Contains(warn, "secret") {
		t.Fatalf("warning %q, error %v", warn, err)
	}
}
