package conversation_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/conversation"
)

// history of n turns: user, assistant asking for a tool, its result, answer.
func history(n int) []conversation.Message {
	var h []conversation.Message
	for i := range n {
		h = append(h,
			conversation.Message{Role: agent.RoleUser, Content: fmt.Sprintf("question %d", i)},
			conversation.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: fmt.Sprintf("c%d", i), Name: "t", Arguments: json.RawMessage(`{}`)}}},
			conversation.Message{Role: agent.RoleTool, ToolCallID: fmt.Sprintf("c%d", i), Content: strings.Repeat("r", 100)},
			conversation.Message{Role: agent.RoleAssistant, Content: fmt.Sprintf("answer %d", i)},
		)
	}
	return h
}

func size(ms []conversation.Message) int {
	n := 0
	for _, m := range ms {
		n += conversation.Size(m)
	}
	return n
}

// Guards: agents[].max_history_bytes (the window).
func TestWindowKeepsPairsAndFits(t *testing.T) {
	h := history(1000)
	turnBytes := size(h[:4])
	for _, max := range []int{0, 10, turnBytes - 1, turnBytes, turnBytes + 1, 3*turnBytes + 7, 100 * turnBytes, size(h), size(h) + 1} {
		w, omitted := conversation.Window(h, max)
		if omitted+len(w) != len(h) {
			t.Fatalf("max %d: kept %d + omitted %d != %d", max, len(w), omitted, len(h))
		}
		if got := size(h[omitted:]); got > max {
			t.Fatalf("max %d: the window holds %d bytes", max, got)
		}
		if len(w) > 0 && w[0].Role != agent.RoleUser {
			t.Fatalf("max %d: the window opens with a %s message", max, w[0].Role)
		}
		// Every tool result follows the assistant turn that asked for it.
		calls := map[string]bool{}
		for _, m := range w {
			for _, c := range m.ToolCalls {
				calls[c.ID] = true
			}
			if m.Role == agent.RoleTool && !calls[m.ToolCallID] {
				t.Fatalf("max %d: result of %s without its call", max, m.ToolCallID)
			}
		}
		// As much as fits: one more turn would not.
		if omitted >= 4 && size(h[omitted-4:]) <= max {
			t.Fatalf("max %d: left out a turn that fits", max)
		}
		if w := len(w); max >= size(h) && w != len(h) {
			t.Fatalf("max %d >= history: kept only %d", max, w)
		}
	}
	w, omitted := conversation.Window(h, 0)
	if len(w) != 0 || omitted != len(h) {
		t.Fatalf("max 0 kept %d", len(w))
	}
	if !strings.Contains(conversation.OmittedNote(12), "12 oldest messages") {
		t.Fatal(conversation.OmittedNote(12))
	}
}

func TestTitle(t *testing.T) {
	for in, want := range map[string]string{
		"hello":                   "hello",
		"\n\n  first line \nnext": "first line",
		"":                        "",
		strings.Repeat("é", 60):   strings.Repeat("é", 38) + "…",
	} {
		got := conversation.Title(in)
		if got != want {
			t.Errorf("Title(%q) = %q, want %q", in, got, want)
		}
		if len(got) > conversation.TitleMax {
			t.Errorf("Title(%q) is %d bytes", in, len(got))
		}
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"0192f0e4-7c1a-7b3e-8f00-123456789abc": true, "ctx.1:a_b-c": true,
		"": false, "new": false, "a b": false, "-x": false, strings.Repeat("a", 129): false, "a/b": false,
	} {
		if conversation.ValidID(id) != want {
			t.Errorf("ValidID(%q) = %v", id, !want)
		}
	}
}
