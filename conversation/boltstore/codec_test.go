package boltstore

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/conversation"
)

func TestCodecRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 2, 3, 4, 5, 678, time.UTC)
	for _, m := range []conversation.Message{
		{},
		{Role: agent.RoleUser, Content: "héllo ✓\nline two", TaskID: "t1", At: at},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "mcp__fs__read", Arguments: json.RawMessage(`{"path":"/a"}`)}, {ID: "c2", Name: "x"}}, At: at},
		{Role: agent.RoleTool, ToolCallID: "c1", Content: strings.Repeat("z", 70000), IsError: true, At: at},
	} {
		got, err := decodeMessage(encodeMessage(m))
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(m)
		b, _ := json.Marshal(got)
		if !got.At.Equal(m.At) && !m.At.IsZero() || got.Role != m.Role || got.Content != m.Content || got.IsError != m.IsError || got.ToolCallID != m.ToolCallID || got.TaskID != m.TaskID || len(got.ToolCalls) != len(m.ToolCalls) {
			t.Fatalf("round trip:\n%s\n%s", a, b)
		}
		for i := range m.ToolCalls {
			if got.ToolCalls[i].ID != m.ToolCalls[i].ID || got.ToolCalls[i].Name != m.ToolCalls[i].Name || string(got.ToolCalls[i].Arguments) != string(m.ToolCalls[i].Arguments) {
				t.Fatalf("call %d: %+v, want %+v", i, got.ToolCalls[i], m.ToolCalls[i])
			}
		}
	}
}

// A damaged record is an error, never a panic or a message made up.
func TestCodecRejectsDamage(t *testing.T) {
	rec := encodeMessage(conversation.Message{Role: agent.RoleAssistant, Content: "abc", ToolCalls: []agent.ToolCall{{ID: "c", Name: "n", Arguments: json.RawMessage(`{}`)}}, At: time.Now()})
	for i := range len(rec) {
		if _, err := decodeMessage(rec[:i]); err == nil {
			t.Fatalf("a record cut to %d of %d bytes decoded", i, len(rec))
		}
	}
	bad := append([]byte{}, rec...)
	bad[0] = 9
	if _, err := decodeMessage(bad); err == nil {
		t.Fatal("an unknown version decoded")
	}
	if _, err := decodeMessage(append(rec, 0)); err == nil {
		t.Fatal("trailing bytes accepted")
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add(encodeMessage(conversation.Message{Role: agent.RoleUser, Content: "x"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b)
		if err != nil {
			return
		}
		if _, err := decodeMessage(encodeMessage(m)); err != nil {
			t.Fatalf("re-encoding a decoded record fails: %v", err)
		}
	})
}
