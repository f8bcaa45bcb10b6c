package mcpserver

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/axocoatl/axocoatl-go/agent"
)

// Whatever the answer's length and wherever the byte bound falls in a
// rune, the text taken is valid UTF-8, at most ProgressTextBytes, the
// answer's end, and at most a rune short of the bound. A model call's end
// makes the next text a new answer.
// Guards: the 4 KiB of text in one progress notification (8 KiB held at most).
func TestAnswerTailBound(t *testing.T) {
	words := []string{"a", "é", "ж€", "𝄞", "xyz "}
	var seq uint64
	for _, n := range []int{1, 100, 1000, 1001, 3000, 3001, 3002, 7777, 20000} {
		a := newAnswerTail()
		var all strings.Builder
		for i := range n {
			w := words[i%len(words)]
			all.WriteString(w)
			a.observe(agent.RunEvent{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText, Text: w}})
		}
		seq = 0
		got, grew := a.take(&seq)
		want := all.String()
		if !grew || len(got) > ProgressTextBytes || !utf8.ValidString(got) || !strings.HasSuffix(want, got) {
			t.Fatalf("%d deltas: took %d bytes (grew %v, valid %v, suffix %v), bound %d", n, len(got), grew, utf8.ValidString(got), strings.HasSuffix(want, got), ProgressTextBytes)
		}
		if wantLen := min(len(want), ProgressTextBytes-utf8.UTFMax+1); len(got) < wantLen {
			t.Fatalf("%d deltas: took %d bytes, want at least %d", n, len(got), wantLen)
		}
		if a.held() > 2*ProgressTextBytes {
			t.Fatalf("%d deltas: the tail keeps %d bytes", n, a.held())
		}
		if _, grew := a.take(&seq); grew {
			t.Fatal("take without new text says it grew")
		}
		a.observe(agent.RunEvent{Kind: agent.RunModelUsage})
		a.observe(agent.RunEvent{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText, Text: "next"}})
		if got, _ := a.take(&seq); got != "next" {
			t.Fatalf("after a model call's end: %q, want the new answer alone", got)
		}
	}
}

// Tool events reach the reporter in the run's order, at most
// progressBuffer of them unsent (a burst beyond costs messages, counted,
// never the run: observe does not wait), and the text beside them is kept.
func TestAnswerTailToolEvents(t *testing.T) {
	a := newAnswerTail()
	a.observe(agent.RunEvent{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText, Text: "let me look"}})
	a.observe(agent.RunEvent{Kind: agent.RunToolStarted, ToolName: "clock"})
	a.observe(agent.RunEvent{Kind: agent.RunToolFinished, ToolName: "clock"})
	a.observe(agent.RunEvent{Kind: agent.RunToolStarted, ToolName: "web"})
	a.observe(agent.RunEvent{Kind: agent.RunToolFinished, ToolName: "web", IsError: true})
	want := []string{"calling tool clock", "tool clock done", "calling tool web", "tool web failed"}
	if got := a.takeTools(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("tool messages %q, want %q", got, want)
	}
	if got := a.takeTools(); got != nil {
		t.Fatalf("taken twice: %q", got)
	}
	for range progressBuffer + 36 {
		a.observe(agent.RunEvent{Kind: agent.RunToolStarted, ToolName: "x"})
	}
	if got := a.takeTools(); len(got) != progressBuffer || a.dropped != 36 {
		t.Fatalf("%d messages kept, %d dropped, of %d: the bound is %d", len(got), a.dropped, progressBuffer+36, progressBuffer)
	}
	var seq uint64
	if text, grew := a.take(&seq); !grew || text != "let me look" {
		t.Fatalf("text %q beside the tool events", text)
	}
}
