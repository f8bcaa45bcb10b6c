package mcpclient

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toResult maps an MCP tool result to what the model sees: text blocks
// joined by newlines, other blocks described in a line each (never dropped
// silently), structured content kept as JSON. A server-reported isError is
// a failed call.
func toResult(res *mcp.CallToolResult) agent.ToolResult {
	out := agent.ToolResult{IsError: res.IsError}
	switch len(res.Content) {
	case 0:
	case 1: // the common case: no slice to build and join
		out.Content = describe(res.Content[0])
	default:
		parts := make([]string, len(res.Content))
		for i, c := range res.Content {
			parts[i] = describe(c)
		}
		out.Content = strings.Join(parts, "\n")
	}
	if res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			out.Structured = raw
			if out.Content == "" {
				// The model reads Content: give it the data rather than nothing.
				out.Content = string(raw)
			}
		}
	}
	if out.IsError && out.Content == "" {
		out.Content = "the tool reported an error without a message"
	}
	return out
}

func describe(c mcp.Content) string {
	switch c := c.(type) {
	case *mcp.TextContent:
		return c.Text
	case *mcp.ImageContent:
		return fmt.Sprintf("[image: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data))
	case *mcp.AudioContent:
		return fmt.Sprintf("[audio: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data))
	case *mcp.ResourceLink:
		s := "[resource link: " + c.URI
		if c.Name != "" {
			s += " (" + c.Name + ")"
		}
		if c.MIMEType != "" {
			s += ", " + c.MIMEType
		}
		if c.Description != "" {
			s += ": " + c.Description
		}
		return s + "]"
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[resource]"
		}
		if r.Text != "" {
			return fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text)
		}
		return fmt.Sprintf("[resource %s: %s, %d bytes]", r.URI, orUnknown(r.MIMEType), len(r.Blob))
	}
	// A content type this client does not know: say so, with its JSON.
	raw, err := json.Marshal(c)
	if err != nil {
		return "[unsupported content]"
	}
	if len(raw) > 256 {
		raw = append(raw[:256:256], "…"...)
	}
	return "[unsupported content: " + string(raw) + "]"
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}
