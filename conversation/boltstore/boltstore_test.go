package boltstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/conversation/boltstore"
	"github.com/axocoatl/axocoatl-go/conversation/storetest"
)

func open(t *testing.T, l conversation.Limits) conversation.Store {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), boltstore.FileName), boltstore.Options{Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Guards: every conversations.* bound (storetest) on the bbolt store.
func TestStore(t *testing.T) { storetest.Run(t, open) }

var ctx = context.Background()

func turn(text string) []conversation.Message {
	at := time.Now().UTC()
	return []conversation.Message{
		{Role: agent.RoleUser, Content: text, TaskID: "t", At: at},
		{Role: agent.RoleAssistant, Content: "answer to " + text, TaskID: "t", At: at},
	}
}

// TestSurvivesReopen: what a closed store held is there when the file is
// opened again: infos, messages in order, the list order, the counts that
// bound it.
func TestSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), boltstore.FileName)
	s, err := boltstore.Open(path, boltstore.Options{Limits: conversation.Limits{MaxPerAgent: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c1", "c2"} {
		if err := s.Create(ctx, conversation.Info{ID: id, AgentID: "a", Title: id}); err != nil {
			t.Fatal(err)
		}
		if err := s.Append(ctx, id, turn("hello "+id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Append(ctx, "c1", turn("again")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = boltstore.Open(path, boltstore.Options{Limits: conversation.Limits{MaxPerAgent: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	msgs, err := s.Messages(ctx, "c1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 || msgs[0].Content != "hello c1" || msgs[3].Content != "answer to again" {
		t.Fatalf("c1 after reopen: %+v", msgs)
	}
	p, err := s.List(ctx, conversation.Query{})
	if err != nil || len(p.Conversations) != 2 || p.Conversations[0].ID != "c1" {
		t.Fatalf("List after reopen = %+v, %v", p, err)
	}
	// The per-agent count survived: a third conversation evicts c2 (the
	// least recently updated).
	if err := s.Create(ctx, conversation.Info{ID: "c3", AgentID: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "c2"); !errors.Is(err, conversation.ErrNotFound) {
		t.Fatalf("c2 after max_per_agent was reached again: %v", err)
	}
}

// TestSecondProcessRefused: bbolt's lock keeps a second opener out; it
// waits OpenTimeout and says why.
func TestSecondProcessRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), boltstore.FileName)
	s, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	_, err = boltstore.Open(path, boltstore.Options{OpenTimeout: 200 * time.Millisecond})
	if !errors.Is(err, boltstore.ErrInUse) {
		t.Fatalf("second Open = %v, want ErrInUse", err)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("second Open gave up after %v, OpenTimeout 200ms", waited)
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("error %q does not name the file", err)
	}
}

// TestDeletedTextUntilCompact proves what the package documentation says
// about deletion: bbolt leaves a deleted conversation's text in free pages
// of the file; Compact leaves none.
func TestDeletedTextUntilCompact(t *testing.T) {
	path := filepath.Join(t.TempDir(), boltstore.FileName)
	s, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	secret := "the-launch-code-is-" + strings.Repeat("7", 40)
	if err := s.Create(ctx, conversation.Info{ID: "c1", AgentID: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, conversation.Info{ID: "keep", AgentID: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "c1", turn(secret)); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "keep", turn("kept text")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := boltstore.Compact(path); !errors.Is(err, boltstore.ErrInUse) {
		t.Fatalf("Compact of an open store = %v, want ErrInUse", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(secret)) {
		t.Fatal("the deleted text is not in the file: bbolt no longer leaves freed pages as they were; the package documentation and docs/conversations.md say it does")
	}
	if err := boltstore.Compact(path); err != nil {
		t.Fatal(err)
	}
	raw, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(secret)) {
		t.Fatal("the deleted text is still in the file after Compact")
	}
	s, err = boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if msgs, err := s.Messages(ctx, "keep", 0, 0); err != nil || len(msgs) != 2 || msgs[0].Content != "kept text" {
		t.Fatalf("after Compact, keep = %+v, %v", msgs, err)
	}
	if _, err := s.Get(ctx, "c1"); !errors.Is(err, conversation.ErrNotFound) {
		t.Fatalf("after Compact, c1 = %v", err)
	}
}

func TestSharedStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T, l conversation.Limits) conversation.Store {
		s, err := boltstore.OpenShared(filepath.Join(t.TempDir(), boltstore.FileName), boltstore.Options{Limits: l})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestSharedLetsTheOwnerIn: a shared store holds the file only during
// its operations: an owner (Open) can take it between two, the shared
// store's next operation then fails with ErrInUse after its OpenTimeout,
// and OpenShared itself fails while the owner holds it.
func TestSharedLetsTheOwnerIn(t *testing.T) {
	path := filepath.Join(t.TempDir(), boltstore.FileName)
	shared, err := boltstore.OpenShared(path, boltstore.Options{OpenTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	if err := shared.Create(ctx, conversation.Info{ID: "c1", AgentID: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := shared.Append(ctx, "c1", turn("through mcp serve")); err != nil {
		t.Fatal(err)
	}
	owner, err := boltstore.Open(path, boltstore.Options{OpenTimeout: time.Second})
	if err != nil {
		t.Fatalf("the owner could not open the file a shared store uses: %v", err)
	}
	defer owner.Close()
	if msgs, err := owner.Messages(ctx, "c1", 0, 0); err != nil || len(msgs) != 2 || msgs[0].Content != "through mcp serve" {
		t.Fatalf("the owner reads %+v, %v", msgs, err)
	}
	if err := shared.Append(ctx, "c1", turn("again")); !errors.Is(err, boltstore.ErrInUse) {
		t.Fatalf("a shared Append while the owner holds the file = %v, want ErrInUse", err)
	}
	if _, err := boltstore.OpenShared(path, boltstore.Options{OpenTimeout: 100 * time.Millisecond}); !errors.Is(err, boltstore.ErrInUse) {
		t.Fatalf("OpenShared while the owner holds the file = %v, want ErrInUse", err)
	}
}

// An id whose conversation idled past idle_ttl can start a new one, even
// when the expired one is beyond what one Create sweeps (256, oldest
// first).
func TestCreateOverExpired(t *testing.T) {
	s := open(t, conversation.Limits{IdleTTL: 500 * time.Millisecond})
	const n = 300
	for i := range n {
		if err := s.Create(ctx, conversation.Info{ID: fmt.Sprintf("c%03d", i), AgentID: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	last := fmt.Sprintf("c%03d", n-1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := s.Get(ctx, last); errors.Is(err, conversation.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the conversation never expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Create(ctx, conversation.Info{ID: last, AgentID: "a"}); err != nil {
		t.Fatalf("Create over an expired conversation: %v", err)
	}
	if info, err := s.Get(ctx, last); err != nil || info.Messages != 0 {
		t.Fatalf("Get = %+v, %v", info, err)
	}
}
