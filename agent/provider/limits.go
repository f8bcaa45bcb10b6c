package provider

// MaxOpenAITools is the most tool definitions OpenAI's Chat Completions
// accepts in one request (more is an HTTP 400).
const MaxOpenAITools = 128

// MaxToolDefinitions implements agent.ToolLimiter: a run offered more tools
// than the openai provider accepts fails with a message to narrow `tools:`
// instead of every request being refused. The ollama provider (the same
// wire) states no such limit.
func (m *openAIModel) MaxToolDefinitions() int {
	if m.kind == OpenAI {
		return MaxOpenAITools
	}
	return 0
}
