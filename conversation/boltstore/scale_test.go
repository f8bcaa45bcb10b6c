package boltstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/conversation/boltstore"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// rss is the process's resident set, from /proc (Linux); "?" elsewhere.
func rss() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// retainedHeap is the live heap after two collections.
func retainedHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func newEngine(t testing.TB, s conversation.Store) *axocoatl.Engine {
	t.Helper()
	e := axocoatl.New(axocoatl.Options{Conversations: s})
	if err := e.AddAgent(agent.Spec{ID: "a"}, provider.EchoModel{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// A client creating 100,000 conversations through the Engine: the store
// keeps max_conversations of them (the least recently updated go), and
// the process's retained heap stays flat: they are on disk, not in
// memory. The file skips its fsyncs (Options.NoSync) to keep the run
// short: the durability of each commit is TestKillMidWrite's matter, not
// this test's.
// Guards: conversations.max_conversations at 100,000 conversations.
func TestHundredThousandConversations(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 turns; skipped with -short")
	}
	total, bound := 100_000, 10_000
	if testutil.RaceEnabled {
		// The race detector makes each turn ~5x slower: the same shape,
		// a tenth of the size, keeps the run within minutes.
		total, bound = 10_000, 1_000
	}
	path := filepath.Join(t.TempDir(), boltstore.FileName)
	s, err := boltstore.Open(path, boltstore.Options{NoSync: true, Limits: conversation.Limits{MaxConversations: bound}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := newEngine(t, s)
	run := func(from, to int) {
		for i := from; i < to; i++ {
			res, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: fmt.Sprintf("conversation number %d, a line of text", i), ConversationID: conversation.New})
			if err != nil {
				t.Fatalf("conversation %d: %v", i, err)
			}
			if res.ConversationID == "" {
				t.Fatalf("conversation %d: no id", i)
			}
		}
	}
	// Warm up past the bound, so that the measure starts with the store
	// full and evicting.
	run(0, 2*bound)
	base, baseRSS := retainedHeap(), rss()
	run(2*bound, total)
	after := retainedHeap()
	grown := int64(after) - int64(base)
	t.Logf("retained heap: %d KiB after %d conversations, %d KiB after %d (%+d KiB); RSS %s then %s (it counts the file's pages bbolt has mapped)", base>>10, 2*bound, after>>10, total, grown>>10, baseRSS, rss())
	// 80,000 conversations more (8,000 under -race): one Info in memory
	// each (~300 B) would be 24 MB (2.4 MB).
	if limit := int64(total-2*bound) * 32; grown > limit {
		t.Fatalf("retained heap grew by %d KiB over %d conversations (bound %d KiB): they are kept in memory", grown>>10, total-2*bound, limit>>10)
	}

	// Within the bound, the newest kept.
	n, cursor := 0, ""
	var newest string
	for {
		p, err := s.List(ctx, conversation.Query{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 && len(p.Conversations) > 0 {
			newest = p.Conversations[0].Title
		}
		n += len(p.Conversations)
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if n != bound {
		t.Fatalf("%d conversations kept, max_conversations %d", n, bound)
	}
	if want := fmt.Sprintf("conversation number %d, a line of text", total-1); newest != want {
		t.Fatalf("newest kept: %q, want %q", newest, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s, err = boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if fi, err := os.Stat(path); err == nil {
		t.Logf("conversations.db: %.1f MB for %d conversations, opened again in %v", float64(fi.Size())/1e6, bound, time.Since(start))
	}
}
