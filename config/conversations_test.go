package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// Each bad value of the conversations section (and an agent's
// max_history_bytes) is a typed error at its key's line.
func TestConversationsSectionErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text, key, at, msg string
	}{
		{"store", "agents:\n  - id: a\nconversations:\n  store: sqlite\n", "conversations.store", "store: sqlite", `"sqlite" is unknown`},
		{"nats without nats", "agents:\n  - id: a\nconversations:\n  store: nats\n", "conversations.store", "store: nats", "lattice.backend: nats"},
		{"max_bytes", "agents:\n  - id: a\nconversations:\n  max_bytes: 100\n", "conversations.max_bytes", "max_bytes: 100", "at least 4096"},
		{"max_total_bytes", "agents:\n  - id: a\nconversations:\n  max_total_bytes: 100\n", "conversations.max_total_bytes", "max_total_bytes: 100", "at least 4096"},
		{"idle_ttl", "agents:\n  - id: a\nconversations:\n  idle_ttl: 5s\n", "conversations.idle_ttl", "idle_ttl: 5s", "at least 1m0s"},
		{"max_history_bytes", "agents:\n  - id: a\n    max_history_bytes: -1\n", "agents[0].max_history_bytes", "max_history_bytes: -1", "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantFieldError(t, nil, tc.text, tc.key, tc.at, tc.msg) })
	}
	// The section's own Validate says the key, typed, for a host that
	// fills the struct in Go.
	err := config.ConversationsConfig{Store: "sqlite"}.Validate()
	var ce *axocoatl.ConfigError
	if !errors.Is(err, axocoatl.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Key != "store" {
		t.Fatalf("Validate = %#v, want an axocoatl.ConfigError at store", err)
	}
	// An unknown key is refused, not ignored (a misspelt bound).
	_, err = config.ParseWith(context.Background(), "a.yaml", []byte("agents:\n  - id: a\nconversations:\n  max_convs: 5\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "max_convs") {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestConversationStoreChoice(t *testing.T) {
	for text, want := range map[string]string{
		"agents: [{id: a}]\n":                                                         config.StoreBolt,
		"agents: [{id: a}]\nlattice: {backend: nats}\n":                               config.StoreNATS,
		"agents: [{id: a}]\nlattice: {backend: nats}\nconversations: {store: bolt}\n": config.StoreBolt,
		"agents: [{id: a}]\nconversations: {store: memory}\n":                         config.StoreMemory,
	} {
		cfg, err := config.ParseWith(context.Background(), "a.yaml", []byte(text), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.ConversationStore(); got != want {
			t.Errorf("%q: store %q, want %q", text, got, want)
		}
	}
}

func buildAt(t *testing.T, text, dataDir string, opts config.BuildOptions) *config.Runtime {
	t.Helper()
	cfg, err := config.ParseWith(context.Background(), "a.yaml", []byte(text), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.DataDir = dataDir
	rt, err := cfg.Build(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func closeRT(t *testing.T, rt *config.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// The default store is conversations.db in the data dir, bounded by the
// section's limits, and what it holds outlives the Runtime.
func TestConversationsInDataDir(t *testing.T) {
	dir := t.TempDir()
	const text = "agents: [{id: a}]\nconversations:\n  max_conversations: 7\n  max_messages: 50\n  idle_ttl: 2h\n"
	rt := buildAt(t, text, dir, config.BuildOptions{})
	l := rt.Engine.Conversations().Limits()
	if l.MaxConversations != 7 || l.MaxMessages != 50 || l.IdleTTL != 2*time.Hour || l.MaxPerAgent != conversation.DefaultMaxPerAgent {
		t.Fatalf("limits %+v", l)
	}
	path := filepath.Join(dir, "conversations.db")
	if rt.ConversationStore != "bolt "+path {
		t.Fatalf("ConversationStore %q", rt.ConversationStore)
	}
	res, err := rt.Engine.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "a", Input: "remember me", ConversationID: conversation.New})
	if err != nil {
		t.Fatal(err)
	}
	closeRT(t, rt)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("conversations.db: %v %v", fi, err)
	}
	rt = buildAt(t, text, dir, config.BuildOptions{})
	defer closeRT(t, rt)
	msgs, err := rt.Engine.Conversations().Messages(context.Background(), res.ConversationID, 0, 0)
	if err != nil || len(msgs) != 2 || msgs[0].Content != "remember me" {
		t.Fatalf("after a rebuild: %+v, %v", msgs, err)
	}
}

func TestConversationsInMemoryWriteNothing(t *testing.T) {
	dir := t.TempDir()
	rt := buildAt(t, "agents: [{id: a}]\nconversations: {store: memory}\n", dir, config.BuildOptions{})
	if _, err := rt.Engine.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "a", Input: "x", ConversationID: conversation.New}); err != nil {
		t.Fatal(err)
	}
	closeRT(t, rt)
	if _, err := os.Stat(filepath.Join(dir, "conversations.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("store: memory wrote conversations.db: %v", err)
	}
}

// A process sharing the data dir (mcp serve) beside a daemon holding
// conversations.db keeps its conversations in memory and says so, with
// the fix; without a daemon it keeps them in the file, opened only for
// each operation, so that a daemon started later opens the file and sees
// them.
func TestSharedDataDirConversations(t *testing.T) {
	dir := t.TempDir()
	const text = "agents: [{id: a}]\n"
	holder := buildAt(t, text, dir, config.BuildOptions{})
	var logs testutil.SyncBuffer
	cfg, err := config.ParseWith(context.Background(), "a.yaml", []byte(text), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.DataDir = dir
	start := time.Now()
	shared, err := cfg.Build(context.Background(), config.BuildOptions{SharedDataDir: true, Logger: cfg.NewLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(shared.ConversationStore, "memory") {
		t.Fatalf("beside a holder: store %q, want memory", shared.ConversationStore)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Fatalf("Build waited %v for the held file", waited)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "in memory") || !strings.Contains(l, "/mcp") {
		t.Fatalf("no warning naming the consequence and the fix:\n%s", l)
	}
	closeRT(t, shared)
	closeRT(t, holder)

	shared = buildAt(t, text, dir, config.BuildOptions{SharedDataDir: true})
	defer closeRT(t, shared)
	if !strings.HasPrefix(shared.ConversationStore, "bolt ") {
		t.Fatalf("alone: store %q, want bolt", shared.ConversationStore)
	}
	res, err := shared.Engine.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "a", Input: "through mcp serve", ConversationID: conversation.New})
	if err != nil {
		t.Fatal(err)
	}
	// A daemon started now opens the file at once and sees the turn.
	daemon := buildAt(t, text, dir, config.BuildOptions{})
	defer closeRT(t, daemon)
	msgs, err := daemon.Engine.Conversations().Messages(context.Background(), res.ConversationID, 0, 0)
	if err != nil || len(msgs) != 2 || msgs[0].Content != "through mcp serve" {
		t.Fatalf("the daemon reads %+v, %v", msgs, err)
	}
}

// doctor says which store and where, without opening it.
func TestDoctorNamesTheConversationStore(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.ParseWith(context.Background(), "a.yaml", []byte("server: {addr: 127.0.0.1:0}\nagents: [{id: a}]\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.DataDir = dir
	var out strings.Builder
	cfg.Doctor(context.Background()).Print(&out)
	want := "ok   conversations: bolt " + filepath.Join(dir, "conversations.db") + " (created at first start)"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("doctor said:\n%s\nwant the line %q", out.String(), want)
	}
	if _, err := os.Stat(filepath.Join(dir, "conversations.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("doctor created the file: %v", err)
	}
}
