package approval

import (
	"context"
	"errors"
	"fmt"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// promptUser puts the approval to the door's user; a verdict from anywhere
// else that comes first cancels ctx. It returns why the user could not be
// asked (nil once answered, or withdrawn).
func (m *Module) promptUser(ctx context.Context, pr axocoatl.UserPrompter, info PendingApproval) error {
	msg := fmt.Sprintf("Agent %s wants to call tool %s", info.AgentID, info.Tool)
	if info.Server != "" {
		msg += " (server " + info.Server + ")"
	}
	msg += " with arguments " + info.Arguments + ". Accept to allow this call once; decline to deny it."
	ans, err := pr.PromptUser(ctx, axocoatl.UserPrompt{Message: msg, Approval: &axocoatl.PromptedApproval{
		ID: info.ApprovalID, AgentID: info.AgentID, TaskID: info.TaskID, Tool: info.Tool, Server: info.Server,
		Arguments: info.Arguments, ArgumentsTruncated: info.ArgumentsTruncated, ExpiresAt: info.ExpiresAt,
	}})
	if err != nil {
		if ctx.Err() != nil {
			return nil // withdrawn: the gate is done
		}
		if m.answerable() {
			m.log.Info("could not ask the user through the door; waiting for another verdict", "approval", info.ApprovalID, "error", err)
		}
		return err
	}
	decision := Deny
	if ans.Accepted {
		decision = Allow
	}
	by := ans.By
	if by == "" {
		by = "user_prompt"
	}
	remember := Once
	if ans.Remember == Always {
		remember = Always
	}
	if _, err := m.resolveLocal(info.ApprovalID, decision, remember, by, ""); err != nil && !errors.Is(err, ErrAlreadyResolved) && !errors.Is(err, ErrNotFound) {
		m.log.Warn("user's answer not applied", "approval", info.ApprovalID, "error", err)
	}
	return nil
}
