package a2aremote_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/a2aremote"
)

// The tool name a2a__<name> must stay within the 64 characters model APIs
// accept for a tool name (the limit mcpclient.MaxToolNameLen keeps): a
// longer one makes every request of an agent allowed that tool fail at the
// provider, so the name is refused when the config is read.
func TestNameKeepsToolNameWithin64(t *testing.T) {
	ok := a2aremote.AgentConfig{Name: strings.Repeat("a", 59), URL: "https://planner.example.com"}
	if err := ok.Validate(); err != nil || len(ok.ToolName()) != 64 {
		t.Fatalf("59-character name: %v (tool name %d characters)", err, len(ok.ToolName()))
	}
	long := a2aremote.AgentConfig{Name: strings.Repeat("a", 60), URL: "https://planner.example.com"}
	err := long.Validate()
	if err == nil || !errors.Is(err, a2aremote.ErrInvalidConfig) || !strings.Contains(err.Error(), "at most 59 characters") {
		t.Fatalf("60-character name: %v, want a config error saying at most 59 characters", err)
	}
}
