// Package anthropic is the provider for the Anthropic Messages API, with
// tool use.
//
// [New] takes a [provider.Config] and returns a [*Model], an [agent.Model]
// to register with an agent: the model of each request is the agent's
// [agent.Spec.Model], else [DefaultModel]; an answer is capped at
// [provider.Config.MaxTokens] tokens (zero: [DefaultMaxTokens], as the
// Messages API requires a cap). [Model.Check] is a cheap authenticated
// probe for a host's health check. [Model.GenerateStream] streams the
// same call ([agent.Streamer]); both read the call's [agent.Usage].
//
// It speaks the API with net/http and encoding/json: no SDK, so importing it
// costs a host a second of build time, not minutes. Retries, timeouts,
// limits and errors are the ones every provider shares (see package
// [provider]): failures are [*provider.Error] values.
//
// Keys: New sends cfg.APIKey, else ANTHROPIC_API_KEY (read once, by New), as
// the official SDKs do. ANTHROPIC_BASE_URL and the SDKs' other variables
// are not read.
package anthropic

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

// Defaults of the Anthropic provider.
const (
	// DefaultModel is used when an agent names none: the current Sonnet,
	// Anthropic's balance of speed and intelligence. Another model is
	// chosen per agent (agents[].model in the daemon's config,
	// [agent.Spec.Model]); Anthropic's models overview lists the IDs.
	DefaultModel = "claude-sonnet-5-5"
	// DefaultMaxTokens caps an answer when [provider.Config.MaxTokens] is zero: the
	// Messages API requires a cap.
	DefaultMaxTokens = 4096
	// apiVersion is the Messages API version this client speaks.
	apiVersion = "2023-06-01"
)

// Model speaks the Messages API; [New] builds it. It is safe for
// concurrent use.
type Model struct {
	maxTokens int
	call      *wire.Client
}

var (
	_ agent.Model    = (*Model)(nil)
	_ agent.Streamer = (*Model)(nil)
)

// New returns the model for the `anthropic` provider: cfg.BaseURL (zero:
// https://api.anthropic.com; a base ending in /v1 works too) with
// cfg.APIKey, else ANTHROPIC_API_KEY. Errors name the config key at fault
// (providers.anthropic.…).
func New(cfg provider.Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("providers.%s.%w", provider.Anthropic, err)
	}
	base := cfg.BaseURL
	if base == "" {
		base = provider.DefaultAnthropicBaseURL
	}
	// Paths are /v1/…; accept a base written with the /v1 too.
	if u, err := url.Parse(base); err == nil && strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/v1") {
		u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1")
		base = u.String()
	}
	key := cfg.Key(provider.Anthropic).Reveal()
	header := http.Header{"User-Agent": {"axocoatl-go"}, "Anthropic-Version": {apiVersion}}
	if key != "" {
		header.Set("X-Api-Key", key)
	}
	c, err := wire.New(wire.Options{Kind: provider.Anthropic, BaseURL: base, Key: key, Header: header,
		Timeout: cfg.Timeout, MaxRetries: cfg.MaxRetries, HTTPClient: cfg.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("providers.%s.%w", provider.Anthropic, err)
	}
	m := &Model{maxTokens: cfg.MaxTokens, call: c}
	if m.maxTokens == 0 {
		m.maxTokens = DefaultMaxTokens
	}
	return m, nil
}

// DefaultModel is the model used when a request names none.
func (m *Model) DefaultModel() string { return DefaultModel }

// The Messages API on the wire: only the fields this runtime uses.
type (
	messagesRequest struct {
		Model     string      `json:"model"`
		MaxTokens int         `json:"max_tokens"`
		System    []textBlock `json:"system,omitempty"`
		Messages  []message   `json:"messages"`
		Tools     []tool      `json:"tools,omitempty"`
		Stream    bool        `json:"stream,omitempty"`
	}
	message struct {
		Role    string `json:"role"`
		Content []any  `json:"content"` // textBlock, toolUseBlock, toolResultBlock
	}
	textBlock struct {
		Type string `json:"type"` // "text"
		Text string `json:"text"`
	}
	toolUseBlock struct {
		Type  string          `json:"type"` // "tool_use"
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	toolResultBlock struct {
		Type      string      `json:"type"` // "tool_result"
		ToolUseID string      `json:"tool_use_id"`
		Content   []textBlock `json:"content,omitempty"`
		IsError   bool        `json:"is_error,omitempty"`
	}
	tool struct {
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		InputSchema map[string]any `json:"input_schema"`
	}

	messagesResponse struct {
		// A pointer: an answer always has a content list, empty or not.
		Content *[]struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		StopReason string     `json:"stop_reason"`
		Usage      *wireUsage `json:"usage"`
		Model      string     `json:"model"`
	}

	// wireUsage is the usage of a call; a stream's message_delta repeats
	// the fields it updates (cumulative counts), so each may be absent.
	// Anthropic counts cache reads and cache writes apart from
	// input_tokens.
	wireUsage struct {
		InputTokens              *int64 `json:"input_tokens"`
		OutputTokens             *int64 `json:"output_tokens"`
		CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	}
)

// update sets the fields of u that v has.
func (u *wireUsage) update(v *wireUsage) {
	if v == nil {
		return
	}
	for _, f := range [][2]**int64{
		{&u.InputTokens, &v.InputTokens}, {&u.OutputTokens, &v.OutputTokens},
		{&u.CacheCreationInputTokens, &v.CacheCreationInputTokens}, {&u.CacheReadInputTokens, &v.CacheReadInputTokens},
	} {
		if *f[1] != nil {
			*f[0] = *f[1]
		}
	}
}

// usage is u as [agent.Usage], whose InputTokens counts every input token:
// input_tokens plus the cache writes and reads (the reads are also
// CachedInputTokens).
func (u *wireUsage) usage() agent.Usage {
	if u == nil {
		return agent.Usage{}
	}
	n := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	return agent.Usage{
		InputTokens:       n(u.InputTokens) + n(u.CacheCreationInputTokens) + n(u.CacheReadInputTokens),
		OutputTokens:      n(u.OutputTokens),
		CachedInputTokens: n(u.CacheReadInputTokens),
	}
}

// Generate implements [agent.Model].
func (m *Model) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	body, err := m.request(req)
	if err != nil {
		return nil, &provider.Error{Provider: provider.Anthropic, Message: err.Error()}
	}
	var res messagesResponse
	raw, err := m.call.Call(ctx, http.MethodPost, "/v1/messages", body, &res, true)
	if err != nil {
		return nil, err
	}
	return m.response(raw, &res)
}

// response is the answer res (decoded from raw) as an [agent.Response].
func (m *Model) response(raw []byte, res *messagesResponse) (*agent.Response, error) {
	if res.Content == nil {
		return nil, m.call.Malformed(raw, "no content")
	}
	out := &agent.Response{Usage: res.Usage.usage(), Model: res.Model, FinishReason: res.StopReason}
	var text []string
	for _, b := range *res.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			input := json.RawMessage(`{}`)
			if len(b.Input) > 0 && string(b.Input) != "null" {
				input = wire.CompactJSON(b.Input)
			}
			out.ToolCalls = append(out.ToolCalls, agent.ToolCall{ID: b.ID, Name: b.Name, Arguments: input})
		}
		// Other blocks (thinking, server tools) are the provider's business.
	}
	out.Content = strings.Join(text, "")
	if res.StopReason == "max_tokens" && len(out.ToolCalls) > 0 {
		return nil, m.cutShort()
	}
	return out, nil
}

// cutShort is the failure of an answer that hit max_tokens inside a tool
// call: the input of the last call is cut short, and running it would act
// on arguments the model did not finish.
func (m *Model) cutShort() error {
	return &provider.Error{Provider: provider.Anthropic, Status: http.StatusOK,
		Message: fmt.Sprintf("the answer hit max_tokens (%d) inside a tool call; raise providers.anthropic.max_tokens", m.maxTokens)}
}

func (m *Model) request(req *agent.Request) (*messagesRequest, error) {
	model := req.Model
	if model == "" {
		model = DefaultModel
	}
	p := &messagesRequest{Model: model, MaxTokens: m.maxTokens}
	if req.System != "" {
		p.System = []textBlock{{Type: "text", Text: req.System}}
	}
	for i := 0; i < len(req.Messages); i++ {
		msg := req.Messages[i]
		switch msg.Role {
		case agent.RoleUser:
			p.Messages = append(p.Messages, message{Role: "user", Content: []any{textBlock{Type: "text", Text: msg.Content}}})
		case agent.RoleAssistant:
			var blocks []any
			if msg.Content != "" {
				// The API rejects empty text blocks.
				blocks = append(blocks, textBlock{Type: "text", Text: msg.Content})
			}
			for _, tc := range msg.ToolCalls {
				input := tc.Arguments
				if len(input) == 0 {
					input = json.RawMessage(`{}`)
				}
				blocks = append(blocks, toolUseBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: input})
			}
			if len(blocks) == 0 {
				continue
			}
			p.Messages = append(p.Messages, message{Role: "assistant", Content: blocks})
		case agent.RoleTool:
			// Every result of one assistant turn goes back in one user turn.
			var blocks []any
			for ; i < len(req.Messages) && req.Messages[i].Role == agent.RoleTool; i++ {
				r := req.Messages[i]
				block := toolResultBlock{Type: "tool_result", ToolUseID: r.ToolCallID, IsError: r.IsError}
				if r.Content != "" {
					block.Content = []textBlock{{Type: "text", Text: r.Content}}
				}
				blocks = append(blocks, block)
			}
			i--
			p.Messages = append(p.Messages, message{Role: "user", Content: blocks})
		default:
			return nil, fmt.Errorf("message role %q is not supported", msg.Role)
		}
	}
	for _, t := range req.Tools {
		schema, err := inputSchema(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		p.Tools = append(p.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return p, nil
}

// inputSchema is a tool's JSON Schema as the API's input_schema, which must
// describe an object; every keyword is kept.
func inputSchema(raw json.RawMessage) (map[string]any, error) {
	obj, err := wire.SchemaObject(raw)
	if err != nil {
		return nil, err
	}
	if t := obj["type"]; t != "object" {
		return nil, fmt.Errorf("input schema must be of type object, not %v", t)
	}
	return obj, nil
}

// Check is the `doctor` probe: it lists one model (GET /v1/models?limit=1),
// cheap and authenticated. Not retried; bounded by the Timeout.
func (m *Model) Check(ctx context.Context) error {
	_, err := m.call.Call(ctx, http.MethodGet, "/v1/models?limit=1", nil, nil, false)
	return err
}
