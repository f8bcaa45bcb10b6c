package config_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/conversation/natskv"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// On the NATS lattice the conversations are in the JetStream KV bucket
// the config names (by default, with no conversations section at all),
// shared by two daemons built from it; conversations.store nats without
// the NATS lattice is an error naming the key.
func TestConversationsOnNATS(t *testing.T) {
	ns := testutil.NATSServer(t, testutil.FreeAddr(t), t.TempDir())
	build := func(node, extra string) *config.Runtime {
		src := fmt.Sprintf("agents:\n  - id: x\nlattice:\n  backend: nats\n  nats_url: %s\n  node: %s\n%s", ns.ClientURL(), node, extra)
		cfg, err := config.ParseWith(context.Background(), "d.yaml", []byte(src), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		rt, err := cfg.Build(context.Background(), config.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = rt.Close(ctx)
		})
		return rt
	}
	named := "conversations:\n  max_per_agent: 7\n  nats:\n    bucket: team_convs\n"
	a := build("a", named)
	b := build("b", named)
	if _, ok := a.Engine.Conversations().(*natskv.Store); !ok {
		t.Fatalf("the store on NATS is a %T", a.Engine.Conversations())
	}
	if got := a.Engine.Conversations().Limits().MaxPerAgent; got != 7 {
		t.Fatalf("max_per_agent %d, want 7 from the file", got)
	}
	res, err := a.Engine.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "x", Input: "hello", ConversationID: conversation.New})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := b.Engine.Conversations().Get(context.Background(), res.ConversationID); err != nil || info.Messages != 2 {
		t.Fatalf("daemon b reads %+v, %v", info, err)
	}
	nc, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for _, bucket := range []string{"team_convs"} {
		if _, err := js.KeyValue(context.Background(), bucket); err != nil {
			t.Fatalf("bucket %s: %v", bucket, err)
		}
	}
	build("c", "")
	if _, err := js.KeyValue(context.Background(), natskv.DefaultBucket); err != nil {
		t.Fatalf("the default bucket: %v", err)
	}

	for _, tc := range []struct{ yaml, want string }{
		{"conversations:\n  store: nats\n", "d.yaml:4: conversations.store: nats needs lattice.backend: nats"},
		{"conversations:\n  store: sqlite\n", `d.yaml:4: conversations.store: "sqlite" is unknown (bolt | memory | nats`},
		{"conversations:\n  nats:\n    bucket: a.b\n", `d.yaml:4: conversations.nats: bucket "a.b"`},
	} {
		cfg, err := config.ParseWith(context.Background(), "d.yaml", []byte("agents:\n  - id: x\n"+tc.yaml), env(nil))
		if err == nil {
			var rt *config.Runtime
			rt, err = cfg.Build(context.Background(), config.BuildOptions{})
			if err == nil {
				_ = rt.Close(context.Background())
			}
		}
		t.Logf("%q: %v", tc.yaml, err)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// On a NATS server without JetStream the default keeps conversations in
// the daemon's memory (the cluster runs without JetStream); asking for the
// nats store there is an error saying why.
func TestConversationsOnNATSWithoutJetStream(t *testing.T) {
	ns := testutil.NATSServer(t, testutil.FreeAddr(t), "")
	for _, tc := range []struct{ extra, want string }{
		{"", ""},
		{"conversations:\n  store: nats\n", "JetStream is not enabled"},
	} {
		src := fmt.Sprintf("agents:\n  - id: x\nlattice:\n  backend: nats\n  nats_url: %s\n%s", ns.ClientURL(), tc.extra)
		cfg, err := config.ParseWith(context.Background(), "d.yaml", []byte(src), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		rt, err := cfg.Build(context.Background(), config.BuildOptions{})
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%q: Build = %v, want an error saying %q", tc.extra, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := rt.Engine.Conversations().(*conversation.Memory); !ok {
			t.Errorf("the default store without JetStream is a %T, want the memory store", rt.Engine.Conversations())
		}
		_ = rt.Close(context.Background())
	}
}
