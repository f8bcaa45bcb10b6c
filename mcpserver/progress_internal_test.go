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
