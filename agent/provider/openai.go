package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/axocoatl/axocoatl-go/agent"
)

// Defaults of the OpenAI-compatible providers.
const (
	DefaultOpenAIBaseURL = "https://api.openai.com/v1"
	DefaultOllamaBaseURL = "http://localhost:11434/v1"
	DefaultOpenAIModel   = "gpt-4o-mini"
	DefaultOllamaModel   = "llama3.2"
)

// openAIModel speaks Chat Completions to OpenAI or any compatible server
// (Ollama, vLLM, LM Studio, llama.cpp, OpenRouter, …).
type openAIModel struct {
	kind         string
	defaultModel string
	maxTokens    int
	chat         openai.ChatCompletionService
	models       openai.ModelService
	call         caller
}

func newOpenAI(kind string, cfg Config) (*openAIModel, error) {
	opts, err := openAIOptions(kind, cfg)
	if err != nil {
		return nil, err
	}
	m := &openAIModel{
		kind:         kind,
		defaultModel: DefaultOpenAIModel,
		maxTokens:    cfg.MaxTokens,
		// The services are built directly, not through openai.NewClient,
		// which would also read OPENAI_API_KEY, OPENAI_BASE_URL and other
		// variables from the environment: a provider uses exactly its Config.
		chat:   openai.NewChatCompletionService(opts...),
		models: openai.NewModelService(opts...),
		call:   newCaller(kind, cfg),
	}
	if kind == Ollama {
		m.defaultModel = DefaultOllamaModel
	}
	return m, nil
}

func openAIOptions(kind string, cfg Config) ([]option.RequestOption, error) {
	base := cfg.BaseURL
	switch {
	case base == "" && kind == Ollama:
		base = DefaultOllamaBaseURL
	case base == "":
		base = DefaultOpenAIBaseURL
	case kind == Ollama:
		// Ollama's own URL (http://localhost:11434) serves the OpenAI API
		// under /v1; accept the bare host as the contract's example writes it.
		if u, err := url.Parse(base); err == nil && strings.Trim(u.Path, "/") == "" {
			u.Path = "/v1"
			base = u.String()
		}
	}
	client := cfg.HTTPClient
	if client == nil {
		// No Client.Timeout: the call's context bounds each call instead.
		client = &http.Client{}
	}
	client = guardRedirects(limitBodies(client))
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(client),
		option.WithMaxRetries(0), // retries are ours: see caller
	}
	if !cfg.APIKey.IsZero() {
		opts = append(opts, option.WithAPIKey(cfg.APIKey.Reveal()))
	}
	return opts, nil
}

// Generate implements agent.Model.
func (m *openAIModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	params, err := m.params(req)
	if err != nil {
		return nil, &Error{Provider: m.kind, Message: err.Error()}
	}
	var res *openai.ChatCompletion
	err = m.call.do(ctx, m.call.retries, func(ctx context.Context, resp **http.Response) error {
		var err error
		res, err = m.chat.New(ctx, params, option.WithResponseInto(resp))
		return err
	})
	if err != nil {
		return nil, err
	}
	return m.response(res)
}

func (m *openAIModel) params(req *agent.Request) (openai.ChatCompletionNewParams, error) {
	model := req.Model
	if model == "" {
		model = m.defaultModel
	}
	p := openai.ChatCompletionNewParams{Model: model}
	switch {
	case m.maxTokens > 0 && m.kind == Ollama:
		p.MaxTokens = openai.Int(int64(m.maxTokens)) // what Ollama reads
	case m.maxTokens > 0:
		p.MaxCompletionTokens = openai.Int(int64(m.maxTokens)) // max_tokens is deprecated at OpenAI
	}
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	for _, msg := range req.Messages {
		switch msg.Role {
		case agent.RoleUser:
			p.Messages = append(p.Messages, openai.UserMessage(msg.Content))
		case agent.RoleAssistant:
			var a openai.ChatCompletionAssistantMessageParam
			if msg.Content != "" || len(msg.ToolCalls) == 0 {
				a.Content.OfString = openai.String(msg.Content)
			}
			for _, tc := range msg.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      tc.Name,
							Arguments: argumentsText(tc.Arguments),
						},
					},
				})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case agent.RoleTool:
			// Chat Completions has no error flag on tool results: say it in
			// the text, so the model knows the call failed.
			content := msg.Content
			if msg.IsError {
				content = "Error: " + content
			}
			p.Messages = append(p.Messages, openai.ToolMessage(content, msg.ToolCallID))
		default:
			return p, fmt.Errorf("message role %q is not supported", msg.Role)
		}
	}
	for _, t := range req.Tools {
		schema, err := schemaObject(t.InputSchema)
		if err != nil {
			return p, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	return p, nil
}

func (m *openAIModel) response(res *openai.ChatCompletion) (*agent.Response, error) {
	if res == nil {
		return nil, m.call.malformed("", "no choices")
	}
	if len(res.Choices) == 0 {
		return nil, m.call.malformed(res.RawJSON(), "no choices")
	}
	if !res.Choices[0].JSON.Message.Valid() {
		return nil, m.call.malformed(res.RawJSON(), "the choice has no message")
	}
	msg := res.Choices[0].Message
	if res.Choices[0].FinishReason == "length" && len(msg.ToolCalls) > 0 {
		// The arguments of the last tool call are cut short: running it would
		// act on arguments the model did not finish.
		return nil, &Error{Provider: m.kind, Status: http.StatusOK,
			Message: fmt.Sprintf("the answer hit the token limit inside a tool call; raise providers.%s.max_tokens", m.kind)}
	}
	out := &agent.Response{Content: msg.Content}
	if out.Content == "" && msg.Refusal != "" {
		out.Content = msg.Refusal
	}
	for i, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return nil, &Error{Provider: m.kind, Status: http.StatusOK, Message: fmt.Sprintf("unsupported tool call type %q", tc.Type)}
		}
		id := tc.ID
		if id == "" {
			// Some compatible servers omit ids; the result must still name its call.
			id = fmt.Sprintf("call_%d", i)
		}
		args := tc.Function.Arguments
		if raw := strings.TrimSpace(tc.Function.JSON.Arguments.Raw()); strings.HasPrefix(raw, "{") {
			// Some compatible servers send the arguments as an object, not as text.
			args = raw
		}
		out.ToolCalls = append(out.ToolCalls, agent.ToolCall{ID: id, Name: tc.Function.Name, Arguments: argumentsJSON(args)})
	}
	return out, nil
}

// check lists the models: cheap, authenticated, and served by OpenAI, Ollama
// and the common compatible servers alike.
func (m *openAIModel) check(ctx context.Context) error {
	return m.call.do(ctx, 0, func(ctx context.Context, resp **http.Response) error {
		_, err := m.models.List(ctx, option.WithResponseInto(resp))
		return err
	})
}

// schemaObject decodes a tool's JSON Schema for the SDK. Zero means an
// object with any properties. An object schema gets an explicit empty
// "properties", which some compatible servers insist on.
func schemaObject(raw json.RawMessage) (map[string]any, error) {
	schema := map[string]any{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &schema); err != nil {
			return nil, fmt.Errorf("input schema is not a JSON object: %w", err)
		}
	}
	if _, ok := schema["type"]; !ok {
		schema["type"] = "object"
	}
	if schema["type"] == "object" {
		if _, ok := schema["properties"]; !ok {
			schema["properties"] = map[string]any{}
		}
	}
	return schema, nil
}

// argumentsJSON turns the arguments text a model produced into the JSON the
// tool receives. Empty means no arguments; text that is not JSON is passed as
// a JSON string, so the tool rejects it and the model hears why.
func argumentsJSON(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage(`{}`)
	}
	return compactJSON([]byte(s))
}

// compactJSON returns valid JSON without insignificant spaces, so tools and
// events see one spelling whatever the model produced; text that is not
// JSON becomes a JSON string.
func compactJSON(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err == nil {
		return buf.Bytes()
	}
	q, _ := json.Marshal(string(b))
	return q
}

// argumentsText is the inverse, for replaying an assistant turn.
func argumentsText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	return string(raw)
}
