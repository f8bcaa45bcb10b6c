package conversation

import (
	"fmt"

	"github.com/axocoatl/axocoatl-go/agent"
)

// Window returns the most recent of history (oldest first) that fits
// maxBytes ([Size] summed), as a model sees it, and how many of the oldest
// messages it left out. It cuts only before a user message, so an
// assistant turn is never separated from the tool results of its calls
// and the window opens with the user's words, as every provider wants.
// maxBytes <= 0 keeps nothing.
func Window(history []Message, maxBytes int) (window []agent.Message, omitted int) {
	start := len(history) // the first message kept
	used := 0
	for i := len(history) - 1; i >= 0; i-- {
		used += Size(history[i])
		if used > maxBytes {
			break
		}
		if history[i].Role == agent.RoleUser {
			start = i // a cut is allowed here: everything from i fits
		}
	}
	window = make([]agent.Message, 0, len(history)-start)
	for _, m := range history[start:] {
		window = append(window, m.AgentMessage())
	}
	return window, start
}

// OmittedNote is what the model is told (at the end of its system prompt)
// when a window left out the n oldest messages of its conversation.
func OmittedNote(n int) string {
	return fmt.Sprintf("Note: this conversation is longer than what you are shown: its %d oldest messages were left out.", n)
}
