package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// ElicitationBy is the [axocoatl.UserAnswer].By of an answer given through MCP form
// elicitation: what the audit trail of a gate records as its resolver.
const ElicitationBy = "mcp_elicitation"

// confirmSchema is the form of a yes/no question: no fields, the client's
// accept, decline and cancel buttons are the answer.
var confirmSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// ErrNoElicitation is the error of the prompter a run gets when its MCP
// client declared no form elicitation: its user cannot be asked. A gate
// that gets it decides through its other channels (the approval module
// waits for the dashboard or its API when the host serves them, or
// another engine on a shared lattice), and with none denies the call at
// once, saying why.
var ErrNoElicitation = errors.New("mcpserver: the calling MCP client declared no form elicitation, so its user cannot be asked: use a client that supports form elicitation (2025-11-25 elicitation, or 2026-07-28 InputRequiredResult), or answer on the dashboard or the approvals API")

// noElicitation is the prompter of a run whose client cannot be asked.
var noElicitation = axocoatl.UserPrompterFunc(func(context.Context, axocoatl.UserPrompt) (axocoatl.UserAnswer, error) {
	return axocoatl.UserAnswer{}, ErrNoElicitation
})

// elicitPrompter returns the calling client as an [axocoatl.UserPrompter]
// when it supports form elicitation in the handshake era (accept = yes;
// decline or cancel = no; a question gets its schema and the form's
// content), else a prompter that fails at once with [ErrNoElicitation], so
// the gate knows at once that its user is not asked. (A 2026-07-28 client
// with form elicitation is asked through InputRequiredResults instead: see
// callWithInput.)
func elicitPrompter(req *mcp.CallToolRequest) axocoatl.UserPrompter {
	ss := req.Session
	if ss == nil || statelessEra(req.ProtocolVersion()) {
		return noElicitation
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return noElicitation
	}
	if el := ip.Capabilities.Elicitation; el.Form == nil && el.URL != nil {
		return noElicitation // URL elicitation only
	}
	return axocoatl.UserPrompterFunc(func(ctx context.Context, p axocoatl.UserPrompt) (axocoatl.UserAnswer, error) {
		schema := confirmSchema
		if p.Schema != nil {
			schema = p.Schema
		}
		msg := p.Message
		for try := 1; ; try++ {
			res, err := ss.Elicit(ctx, &mcp.ElicitParams{Mode: "form", Message: msg, RequestedSchema: schema})
			if err != nil {
				// The go-sdk checks the content against the schema first
				// (its error names no sentinel, and quotes the value: not
				// passed on).
				if !strings.Contains(err.Error(), "does not match requested schema") || ctx.Err() != nil {
					return axocoatl.UserAnswer{}, err
				}
				if try >= maxElicitTries {
					return axocoatl.UserAnswer{}, fmt.Errorf("%w: %d answers refused, the last: %w", ErrBadElicitAnswer, try, errSchemaMismatch)
				}
				msg = refusedMessage(errSchemaMismatch, p.Message)
				continue
			}
			ans := axocoatl.UserAnswer{Accepted: res.Action == "accept", By: ElicitationBy}
			if !ans.Accepted {
				return ans, nil
			}
			ans.Content = res.Content
			if p.Check == nil {
				return ans, nil
			}
			// A question's answer is checked by the asker's own check
			// before it is taken; a bad one is asked again, saying why.
			if ans.Content, err = p.Check(res.Content); err == nil {
				return ans, nil
			}
			if try >= maxElicitTries {
				return axocoatl.UserAnswer{}, fmt.Errorf("%w: %d answers refused, the last: %w", ErrBadElicitAnswer, try, err)
			}
			msg = refusedMessage(err, p.Message)
		}
	})
}

// maxElicitTries bounds how often one question is put to a client whose
// answers do not match its schema (a 2025-11-25 elicitation; the
// 2026-07-28 rounds are bounded by maxInputRounds).
const maxElicitTries = 3

// ErrBadElicitAnswer: the client's user answered a question maxElicitTries
// times with content that does not match its schema; the question is left
// to the gate's other channels (or its timeout).
var ErrBadElicitAnswer = errors.New("mcpserver: the client's answers did not match the question's schema")

// errSchemaMismatch is why an answer the go-sdk refused was refused.
var errSchemaMismatch = errors.New("the values do not match the requested schema")

// refusedMessage is a question's text asked again after a bad answer: why
// it was refused (which property and rule, never the value), then the
// question.
func refusedMessage(err error, message string) string {
	return "Your answer was refused (" + err.Error() + "). " + message
}
