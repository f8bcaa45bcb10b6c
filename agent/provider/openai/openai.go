// Package openai is the provider for the Chat Completions API of OpenAI and
// of every compatible server (Ollama, vLLM, LM Studio, llama.cpp,
// OpenRouter, …), with tool calls.
//
// [New] (the `openai` kind) and [NewOllama] (the `ollama` kind, the same
// wire at http://localhost:11434/v1) take a [provider.Config] and return a
// [*Model], an [agent.Model] to register with an agent: the model of each
// request is the agent's [agent.Spec.Model], else [DefaultModel] or
// [DefaultOllamaModel]. [Model.Check] is a cheap authenticated probe for a
// host's health check. [Model.GenerateStream] streams the same call
// ([agent.Streamer]); both read the call's [agent.Usage].
//
// It speaks the API with net/http and encoding/json: no SDK, so importing it
// costs a host a second of build time, not minutes. Retries, timeouts,
// limits and errors are the ones every provider shares (see package
// [provider]): failures are [*provider.Error] values.
//
// Keys: New sends cfg.APIKey, else OPENAI_API_KEY (read once, by New),
// whatever the base_url, as the official SDKs do; NewOllama sends cfg.APIKey
// only. OPENAI_BASE_URL and the SDKs' other variables are not read.
//
// OpenAI refuses a request offering more than [MaxTools] tool definitions;
// the openai kind's Model says so through [agent.ToolLimiter], so a run
// offered more fails before its first call ([agent.ErrTooManyTools]).
package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/internal/wire"
)

// Default models, used when an agent names none. Another model is chosen
// per agent (agents[].model in the daemon's config, [agent.Spec.Model]).
const (
	DefaultModel       = "gpt-4o-mini"
	DefaultOllamaModel = "llama3.2"
)

// Model speaks Chat Completions; [New] and [NewOllama] build it. It is
// safe for concurrent use.
type Model struct {
	kind         string
	defaultModel string
	maxTokens    int
	call         *wire.Client
}

var (
	_ agent.Model    = (*Model)(nil)
	_ agent.Streamer = (*Model)(nil)
)

// New returns the model for the `openai` provider: cfg.BaseURL (zero:
// https://api.openai.com/v1) with cfg.APIKey, else OPENAI_API_KEY. Errors
// name the config key at fault (providers.openai.…).
func New(cfg provider.Config) (*Model, error) {
	return newModel(provider.OpenAI, cfg)
}

// NewOllama returns the model for the `ollama` provider: cfg.BaseURL (zero:
// http://localhost:11434/v1; the bare host works too) with cfg.APIKey, if
// any, and llama3.2 as the default model.
func NewOllama(cfg provider.Config) (*Model, error) {
	return newModel(provider.Ollama, cfg)
}

func newModel(kind string, cfg provider.Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("providers.%s.%w", kind, err)
	}
	base := cfg.BaseURL
	switch {
	case base == "" && kind == provider.Ollama:
		base = provider.DefaultOllamaBaseURL
	case base == "":
		base = provider.DefaultOpenAIBaseURL
	case kind == provider.Ollama:
		// Ollama's own URL (http://localhost:11434) serves the OpenAI API
		// under /v1; accept the bare host as the contract's example writes it.
		if u, err := url.Parse(base); err == nil && strings.Trim(u.Path, "/") == "" {
			u.Path = "/v1"
			base = u.String()
		}
	}
	key := cfg.Key(kind).Reveal()
	header := http.Header{"User-Agent": {"axocoatl-go"}}
	if key != "" {
		header.Set("Authorization", "Bearer "+key)
	}
	c, err := wire.New(wire.Options{Kind: kind, BaseURL: base, Key: key, Header: header,
		Timeout: cfg.Timeout, MaxRetries: cfg.MaxRetries, HTTPClient: cfg.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("providers.%s.%w", kind, err)
	}
	m := &Model{kind: kind, defaultModel: DefaultModel, maxTokens: cfg.MaxTokens, call: c}
	if kind == provider.Ollama {
		m.defaultModel = DefaultOllamaModel
	}
	return m, nil
}

// DefaultModel is the model used when a request names none.
func (m *Model) DefaultModel() string { return m.defaultModel }

// Chat Completions on the wire: only the fields this runtime uses.
type (
	chatRequest struct {
		Model               string        `json:"model"`
		Messages            []chatMessage `json:"messages"`
		Tools               []chatTool    `json:"tools,omitempty"`
		MaxTokens           int           `json:"max_tokens,omitempty"`
		MaxCompletionTokens int           `json:"max_completion_tokens,omitempty"`
		Stream              bool          `json:"stream,omitempty"`
		StreamOptions       *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options,omitempty"`
	}
	chatMessage struct {
		Role string `json:"role"`
		// Content is omitted from an assistant turn that only calls tools.
		Content    *string        `json:"content,omitempty"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	chatTool struct {
		Type     string       `json:"type"`
		Function chatFunction `json:"function"`
	}
	chatFunction struct {
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		Parameters  map[string]any `json:"parameters"`
	}

	// chatResponse is decoded leniently where servers differ: content may
	// be null, a string or a list of parts; arguments text or an object.
	chatResponse struct {
		Choices []struct {
			Message *struct {
				Content   json.RawMessage `json:"content"`
				Refusal   json.RawMessage `json:"refusal"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string          `json:"name"`
						Arguments json.RawMessage `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *chatUsage `json:"usage"`
		Model string     `json:"model"`
	}

	// chatUsage is the usage of one call; cached tokens are part of the
	// prompt tokens.
	chatUsage struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
)

// usage is u as [agent.Usage] (zero for none).
func (u *chatUsage) usage() agent.Usage {
	if u == nil {
		return agent.Usage{}
	}
	out := agent.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CachedInputTokens = u.PromptTokensDetails.CachedTokens
	}
	return out
}

// Generate implements [agent.Model].
func (m *Model) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	body, err := m.request(req)
	if err != nil {
		return nil, &provider.Error{Provider: m.kind, Message: err.Error()}
	}
	var res chatResponse
	raw, err := m.call.Call(ctx, http.MethodPost, "/chat/completions", body, &res, true)
	if err != nil {
		return nil, err
	}
	return m.response(raw, &res)
}

func (m *Model) request(req *agent.Request) (*chatRequest, error) {
	model := req.Model
	if model == "" {
		model = m.defaultModel
	}
	p := &chatRequest{Model: model}
	switch {
	case m.maxTokens > 0 && m.kind == provider.Ollama:
		p.MaxTokens = m.maxTokens // what Ollama reads
	case m.maxTokens > 0:
		p.MaxCompletionTokens = m.maxTokens // max_tokens is deprecated at OpenAI
	}
	text := func(s string) *string { return &s }
	if req.System != "" {
		p.Messages = append(p.Messages, chatMessage{Role: "system", Content: text(req.System)})
	}
	for _, msg := range req.Messages {
		switch msg.Role {
		case agent.RoleUser:
			p.Messages = append(p.Messages, chatMessage{Role: "user", Content: text(msg.Content)})
		case agent.RoleAssistant:
			a := chatMessage{Role: "assistant"}
			if msg.Content != "" || len(msg.ToolCalls) == 0 {
				a.Content = text(msg.Content)
			}
			for _, tc := range msg.ToolCalls {
				call := chatToolCall{ID: tc.ID, Type: "function"}
				call.Function.Name = tc.Name
				call.Function.Arguments = wire.ArgumentsText(tc.Arguments)
				a.ToolCalls = append(a.ToolCalls, call)
			}
			p.Messages = append(p.Messages, a)
		case agent.RoleTool:
			// Chat Completions has no error flag on tool results: say it in
			// the text, so the model knows the call failed.
			content := msg.Content
			if msg.IsError {
				content = "Error: " + content
			}
			p.Messages = append(p.Messages, chatMessage{Role: "tool", Content: text(content), ToolCallID: msg.ToolCallID})
		default:
			return nil, fmt.Errorf("message role %q is not supported", msg.Role)
		}
	}
	for _, t := range req.Tools {
		schema, err := wire.SchemaObject(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		p.Tools = append(p.Tools, chatTool{Type: "function", Function: chatFunction{Name: t.Name, Description: t.Description, Parameters: schema}})
	}
	return p, nil
}

func (m *Model) response(raw []byte, res *chatResponse) (*agent.Response, error) {
	if len(res.Choices) == 0 {
		return nil, m.call.Malformed(raw, "no choices")
	}
	choice := res.Choices[0]
	msg := choice.Message
	if msg == nil {
		return nil, m.call.Malformed(raw, "the choice has no message")
	}
	if choice.FinishReason == "length" && len(msg.ToolCalls) > 0 {
		return nil, m.cutShort()
	}
	out := &agent.Response{Content: contentText(msg.Content), Usage: res.Usage.usage(), Model: res.Model, FinishReason: choice.FinishReason}
	if out.Content == "" {
		out.Content = contentText(msg.Refusal)
	}
	for i, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return nil, &provider.Error{Provider: m.kind, Status: http.StatusOK, Message: fmt.Sprintf("unsupported tool call type %q", tc.Type)}
		}
		id := tc.ID
		if id == "" {
			// Some compatible servers omit ids; the result must still name its call.
			id = fmt.Sprintf("call_%d", i)
		}
		var args string
		if raw := strings.TrimSpace(string(tc.Function.Arguments)); strings.HasPrefix(raw, "{") {
			// Some compatible servers send the arguments as an object, not as text.
			args = raw
		} else {
			_ = json.Unmarshal(tc.Function.Arguments, &args) // null or absent: no arguments
		}
		out.ToolCalls = append(out.ToolCalls, agent.ToolCall{ID: id, Name: tc.Function.Name, Arguments: wire.ArgumentsJSON(args)})
	}
	return out, nil
}

// contentText is a message's text: a JSON string, or the text parts of a
// list (as some compatible servers answer); "" for null.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "output_text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// Check is the `doctor` probe: it lists the models (GET {base}/models),
// cheap, authenticated, and served by OpenAI, Ollama and the common
// compatible servers alike. Not retried; bounded by the Timeout.
func (m *Model) Check(ctx context.Context) error {
	_, err := m.call.Call(ctx, http.MethodGet, "/models", nil, nil, false)
	return err
}

// MaxTools is the most tool definitions OpenAI's Chat Completions accepts in
// one request (more is an HTTP 400).
const MaxTools = 128

// MaxToolDefinitions implements [agent.ToolLimiter]: a run offered more tools
// than the openai provider accepts fails with a message to narrow `tools:`
// instead of every request being refused. The ollama provider (the same
// wire) states no such limit.
func (m *Model) MaxToolDefinitions() int {
	if m.kind == provider.OpenAI {
		return MaxTools
	}
	return 0
}
