package provider

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/axocoatl/axocoatl-go/secret"
)

// EnvKey names the variable a provider kind reads its API key from when
// its api_key is empty, as the kind's official SDKs do: OPENAI_API_KEY for
// openai, ANTHROPIC_API_KEY for anthropic. It is "" for echo (no key) and
// for ollama, which needs none and must not receive an OpenAI key meant
// for another server.
func EnvKey(kind string) string {
	switch kind {
	case OpenAI:
		return "OPENAI_API_KEY"
	case Anthropic:
		return "ANTHROPIC_API_KEY"
	}
	return ""
}

// Key returns the API key kind sends with c: c.APIKey, else the value of
// [EnvKey](kind) looked up through c.LookupEnv (zero: os.LookupEnv), else
// zero. Providers call it once, when the model is built.
func (c Config) Key(kind string) secret.Secret {
	if !c.APIKey.IsZero() {
		return c.APIKey
	}
	name := EnvKey(kind)
	if name == "" {
		return ""
	}
	lookup := c.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, _ := lookup(name)
	return secret.Secret(strings.TrimSpace(v))
}

// ErrNoKey marks [CheckKey]'s error: a provider that needs an API key has
// none from either place.
var ErrNoKey = errors.New("no API key")

// CheckKey is what a config loader calls, before serving, for each provider
// an agent uses: does kind have the API key it needs with c? It looks
// where the model will ([Config.Key]).
//
//   - A key from api_key or the variable, echo, or ollama on this machine:
//     ("", nil).
//   - No key, for a server that may need none (base_url on this machine or
//     a private network, or ollama elsewhere): a warning, and nil. The
//     calls go without a key.
//   - No key otherwise (the public OpenAI or Anthropic API, or any other
//     remote server): an error (errors.Is(err, ErrNoKey)) naming the key
//     and the variable, e.g. "providers.openai.api_key is empty and
//     OPENAI_API_KEY is not set".
//
// Neither text contains a secret; a base URL is quoted by host only.
func CheckKey(kind string, c Config) (warning string, err error) {
	if kind == Echo || kind == "" || !c.Key(kind).IsZero() {
		return "", nil
	}
	what := "providers." + kind + ".api_key is empty"
	if name := EnvKey(kind); name != "" {
		what += " and " + name + " is not set"
	}
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL(kind)
	}
	host := ""
	if u, err := url.Parse(base); err == nil {
		host = u.Hostname()
	}
	switch {
	case kind == Ollama && local(host):
		return "", nil // Ollama's own server takes no key
	case kind == Ollama || local(host):
		return fmt.Sprintf("%s: calls to %s go without a key (fine if that server needs none)", what, host), nil
	}
	return "", noKeyError(what)
}

// noKeyError is CheckKey's error: its text is the whole message (the
// config layer adds the file and line), and it is ErrNoKey.
type noKeyError string

func (e noKeyError) Error() string        { return string(e) }
func (e noKeyError) Is(target error) bool { return target == ErrNoKey }

// local reports whether host is on this machine or a private network,
// where a self-hosted model server (Ollama, vLLM, llama.cpp, LM Studio)
// commonly takes no key: loopback, private and link-local addresses,
// "localhost", single-label names (a container's service name, "vllm") and
// the .local, .internal and .localhost suffixes.
func local(host string) bool {
	if host == "" {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast()
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || !strings.Contains(h, ".") {
		return true
	}
	for _, suffix := range []string{".localhost", ".local", ".internal"} {
		if strings.HasSuffix(h, suffix) {
			return true
		}
	}
	return false
}

// DefaultBaseURL is where a provider kind sends requests when its config
// names no base_url ("" for echo, which sends none).
func DefaultBaseURL(kind string) string {
	switch kind {
	case OpenAI:
		return DefaultOpenAIBaseURL
	case Ollama:
		return DefaultOllamaBaseURL
	case Anthropic:
		return DefaultAnthropicBaseURL
	}
	return ""
}
