package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/axocoatl/axocoatl-go/agent"
)

// Defaults of the Anthropic provider.
const (
	DefaultAnthropicBaseURL   = "https://api.anthropic.com"
	DefaultAnthropicModel     = string(anthropic.ModelClaudeSonnet4_5)
	DefaultAnthropicMaxTokens = 4096
)

// anthropicModel speaks the Anthropic Messages API with tool use.
type anthropicModel struct {
	maxTokens int64
	messages  anthropic.MessageService
	models    anthropic.ModelService
	call      caller
}

func newAnthropic(cfg Config) (*anthropicModel, error) {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultAnthropicBaseURL
	}
	// The SDK appends /v1/messages; accept a base written with the /v1 too.
	if u, err := url.Parse(base); err == nil && strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/v1") {
		u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1")
		base = u.String()
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{} // the call's context bounds each call
	}
	client = guardRedirects(limitBodies(client))
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	opts := []option.RequestOption{
		// Without this marker the SDK reads ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL,
		// profiles and federation settings from the environment: a provider
		// uses exactly its Config.
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithHTTPClient(client),
		option.WithMaxRetries(0), // retries are ours: see caller
		// Stated explicitly, the SDK's own per-request timeout equals ours
		// and it does not refuse large max_tokens as "needs streaming".
		option.WithRequestTimeout(timeout),
	}
	if !cfg.APIKey.IsZero() {
		opts = append(opts, option.WithAPIKey(cfg.APIKey.Reveal()))
	}
	m := &anthropicModel{
		maxTokens: int64(cfg.MaxTokens),
		messages:  anthropic.NewMessageService(opts...),
		models:    anthropic.NewModelService(opts...),
		call:      newCaller(Anthropic, cfg),
	}
	if m.maxTokens == 0 {
		m.maxTokens = DefaultAnthropicMaxTokens
	}
	return m, nil
}

// Generate implements agent.Model.
func (m *anthropicModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return nil, &Error{Provider: Anthropic, Message: err.Error()}
	}
	var res *anthropic.Message
	err = m.call.do(ctx, m.call.retries, func(ctx context.Context, resp **http.Response) error {
		var err error
		res, err = m.messages.New(ctx, params, option.WithResponseInto(resp))
		return err
	})
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, &Error{Provider: Anthropic, Status: http.StatusOK, Message: "malformed response: empty body"}
	}
	if !res.JSON.Content.Valid() {
		// A real answer always has a content list, empty or not.
		return nil, m.call.malformed(res.RawJSON(), "no content")
	}
	out := &agent.Response{}
	var text []string
	for _, b := range res.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			input := json.RawMessage(`{}`)
			if len(b.Input) > 0 && string(b.Input) != "null" {
				input = compactJSON(b.Input)
			}
			out.ToolCalls = append(out.ToolCalls, agent.ToolCall{ID: b.ID, Name: b.Name, Arguments: input})
		}
		// Other blocks (thinking, server tools) are the provider's business.
	}
	out.Content = strings.Join(text, "")
	if res.StopReason == anthropic.StopReasonMaxTokens && len(out.ToolCalls) > 0 {
		// The input of the last tool call is cut short: running it would act
		// on arguments the model did not finish.
		return nil, &Error{Provider: Anthropic, Status: http.StatusOK,
			Message: fmt.Sprintf("the answer hit max_tokens (%d) inside a tool call; raise providers.anthropic.max_tokens", m.maxTokens)}
	}
	return out, nil
}

func (m *anthropicModel) params(req *agent.Request) (anthropic.MessageNewParams, error) {
	model := req.Model
	if model == "" {
		model = DefaultAnthropicModel
	}
	p := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: m.maxTokens}
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for i := 0; i < len(req.Messages); i++ {
		msg := req.Messages[i]
		switch msg.Role {
		case agent.RoleUser:
			p.Messages = append(p.Messages, anthropic.NewUserMessage(anthropic.NewTextBlock(msg.Content)))
		case agent.RoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			if msg.Content != "" {
				// The API rejects empty text blocks.
				blocks = append(blocks, anthropic.NewTextBlock(msg.Content))
			}
			for _, tc := range msg.ToolCalls {
				input := tc.Arguments
				if len(input) == 0 {
					input = json.RawMessage(`{}`)
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, input, tc.Name))
			}
			if len(blocks) == 0 {
				continue
			}
			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(blocks...))
		case agent.RoleTool:
			// Every result of one assistant turn goes back in one user turn.
			var blocks []anthropic.ContentBlockParamUnion
			for ; i < len(req.Messages) && req.Messages[i].Role == agent.RoleTool; i++ {
				r := req.Messages[i]
				block := anthropic.ToolResultBlockParam{ToolUseID: r.ToolCallID}
				if r.Content != "" {
					block.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: r.Content}}}
				}
				if r.IsError {
					block.IsError = anthropic.Bool(true)
				}
				blocks = append(blocks, anthropic.ContentBlockParamUnion{OfToolResult: &block})
			}
			i--
			p.Messages = append(p.Messages, anthropic.NewUserMessage(blocks...))
		default:
			return p, fmt.Errorf("message role %q is not supported", msg.Role)
		}
	}
	for _, t := range req.Tools {
		schema, err := anthropicSchema(t.InputSchema)
		if err != nil {
			return p, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		tool := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	return p, nil
}

// anthropicSchema maps a JSON Schema object onto the SDK's input_schema,
// keeping every keyword (the SDK names only properties and required).
func anthropicSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	var s anthropic.ToolInputSchemaParam
	obj, err := schemaObject(raw)
	if err != nil {
		return s, err
	}
	if t, ok := obj["type"]; ok && t != "object" {
		return s, fmt.Errorf("input schema must be of type object, not %v", t)
	}
	s.Properties = obj["properties"]
	if req, ok := obj["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
	}
	for k, v := range obj {
		switch k {
		case "type", "properties", "required":
		default:
			if s.ExtraFields == nil {
				s.ExtraFields = map[string]any{}
			}
			s.ExtraFields[k] = v
		}
	}
	return s, nil
}

// check lists one model: cheap and authenticated.
func (m *anthropicModel) check(ctx context.Context) error {
	return m.call.do(ctx, 0, func(ctx context.Context, resp **http.Response) error {
		_, err := m.models.List(ctx, anthropic.ModelListParams{Limit: anthropic.Int(1)}, option.WithResponseInto(resp))
		return err
	})
}
