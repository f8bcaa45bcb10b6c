package mcpserver

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// ElicitationBy is the [axocoatl.UserAnswer].By of an answer given through MCP form
// elicitation: what the audit trail of a gate records as its resolver.
const ElicitationBy = "mcp_elicitation"

// confirmSchema is the form of a yes/no question: no fields, the client's
// accept, decline and cancel buttons are the answer.
var confirmSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// ErrNoElicitation is the error of the prompter a run started by a
// 2026-07-28 client gets: that era has no server-to-client request
// mid-call, so the client's user cannot be asked. A gate that gets it
// decides through its other channels (the approval module logs it and
// waits for a verdict from the dashboard or its API, else denies the call
// when the approval times out).
var ErrNoElicitation = errors.New("mcpserver: the calling MCP client speaks 2026-07-28, where a server cannot ask the client's user mid-call (elicitation needs a retry of the whole call, which a running agent cannot make): approve through the dashboard or the approvals API")

// noElicitation is the prompter of a run started by a 2026-07-28 client.
var noElicitation = axocoatl.UserPrompterFunc(func(context.Context, axocoatl.UserPrompt) (axocoatl.UserAnswer, error) {
	return axocoatl.UserAnswer{}, ErrNoElicitation
})

// elicitPrompter returns the calling client as an [axocoatl.UserPrompter]
// when it supports form elicitation (accept = yes; decline or cancel = no),
// else nil. A gate (approval) asks the user of the calling client through
// it. A client of the stateless era, elicitation capability or not, gets
// a prompter that fails at once with [ErrNoElicitation], so the gate logs
// why its user is not asked (and the call does not decode the client's
// capabilities from its _meta for nothing).
func elicitPrompter(req *mcp.CallToolRequest) axocoatl.UserPrompter {
	ss := req.Session
	if ss == nil {
		return nil
	}
	if statelessEra(req.ProtocolVersion()) {
		return noElicitation
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
