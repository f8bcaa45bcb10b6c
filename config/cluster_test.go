package config_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/axocoatl/axocoatl-go/config"
)

// The cluster section is checked like every module's: a bad value names
// its key and the key's own line (Validate's typed error, not its text).
func TestClusterSectionValidated(t *testing.T) {
	_, err := config.Parse("inline.yaml", []byte("agents:\n  - id: a\ncluster:\n  heartbeat_interval: 2s\n  expire_after: 1s\n"))
	if err == nil || !strings.Contains(err.Error(), "inline.yaml:5: cluster.expire_after") || !strings.Contains(err.Error(), "at least twice heartbeat_interval") {
		t.Fatalf("%v", err)
	}
	_, err = config.Parse("inline.yaml", []byte("cluster:\n  max_nodes: -1\n"))
	if err == nil || !strings.Contains(err.Error(), "inline.yaml:2: cluster.max_nodes: must not be negative") {
		t.Fatalf("%v", err)
	}
}

// Build starts the cluster module with the NATS lattice only, with the
// section's settings and the lattice's node name.
func TestBuildStartsClusterWithNATS(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	ctx := context.Background()
	for _, tc := range []struct{ yaml, node string }{
		{"agents:\n  - id: a\n", ""},
		{"agents:\n  - id: a\nlattice:\n  backend: nats\n  nats_url: " + ns.ClientURL() + "\n  node: here\ncluster:\n  heartbeat_interval: 50ms\n", "here"},
	} {
		cfg, err := config.Parse("inline.yaml", []byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Server.DataDir = t.TempDir() // conversations.db
		rt, err := cfg.Build(ctx, config.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := rt.Cluster != nil; got != (tc.node != "") {
			t.Errorf("%q: cluster module started: %v", tc.yaml, got)
		} else if rt.Cluster != nil && rt.Cluster.Node() != tc.node {
			t.Errorf("cluster node %q, want %q", rt.Cluster.Node(), tc.node)
		}
		if err := rt.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
