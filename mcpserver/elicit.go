package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// ElicitationBy is the UserAnswer.By of an answer given through MCP form
// elicitation: what the audit trail of a gate records as its resolver.
const ElicitationBy = "mcp_elicitation"

// confirmSchema is the form of a yes/no question: no fields, the client's
// accept, decline and cancel buttons are the answer.
var confirmSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// elicitPrompter returns the session's client as an axocoatl.UserPrompter
// when it supports form elicitation (accept = yes; decline or cancel = no),
// else nil. A gate (approval) asks the user of the calling client through
// it.
func elicitPrompter(ss *mcp.ServerSession) axocoatl.UserPrompter {
	if ss == nil {
		return nil
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return nil
	}
	if el := ip.Capabilities.Elicitation; el.Form == nil && el.URL != nil {
		return nil // URL elicitation only
	}
	return axocoatl.UserPrompterFunc(func(ctx context.Context, p axocoatl.UserPrompt) (axocoatl.UserAnswer, error) {
		res, err := ss.Elicit(ctx, &mcp.ElicitParams{Mode: "form", Message: p.Message, RequestedSchema: confirmSchema})
		if err != nil {
			return axocoatl.UserAnswer{}, err
		}
		return axocoatl.UserAnswer{Accepted: res.Action == "accept", By: ElicitationBy}, nil
	})
}
