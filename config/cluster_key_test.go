package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/internal/clustersig"
	"github.com/axocoatl/axocoatl-go/internal/natstest"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// gatedCaller calls the tool "deploy" once, then answers with what it said.
type gatedCaller struct{}

func (gatedCaller) Generate(_ context.Context, req *agent.Request) (*agent.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == agent.RoleTool {
		return &agent.Response{Content: "tool said: " + last.Content}, nil
	}
	return &agent.Response{ToolCalls: []agent.ToolCall{{ID: "1", Name: "deploy", Arguments: json.RawMessage(`{}`)}}}, nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(10 * time.Millisecond) // announcements and approvals arrive with no event to wait on here
	}
}

// Two daemons holding cluster.key (one from the file, one from
// AXOCOATL_CLUSTER_KEY) on a nats-server with TLS (client certificates
// verified) and JWT users: events, tasks and approvals cross them, all
// signed. A third with valid credentials but another key cannot join: it
// lists none of their agents, they list none of its, and its log says why.
func TestSignedDaemonsOnSecuredNATS(t *testing.T) {
	const key, wrongKey = "the-cluster-key-0123456789abcdef", "not-the-cluster-key-0123456789ab"
	pki, op, ns := secureNATS(t)
	url := natstest.TLSURL(ns)
	dir := t.TempDir()
	security := func(name string) string {
		return "  auth:\n    creds_file: " + op.Creds(t, dir, name) + "\n" +
			fmt.Sprintf("  tls:\n    ca_file: %s\n    cert_file: %s\n    key_file: %s\n", pki.CAFile, pki.ClientCert, pki.ClientKey)
	}
	withKey := func(src, k string) string {
		return strings.Replace(src, "cluster:\n", "cluster:\n  key: "+k+"\n", 1)
	}
	a, err := buildDaemon(t, withKey(daemonYAML(t, url, "a", "alpha", security("a")), key), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := buildDaemon(t, daemonYAML(t, url, "b", "beta", security("b")), map[string]string{"AXOCOATL_CLUSTER_KEY": key})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Cluster.Signed() || !b.Cluster.Signed() || a.Cluster.Keyring().KeyID() != b.Cluster.Keyring().KeyID() {
		t.Fatal("the daemons do not sign with the one key")
	}
	var deployed int
	var mu sync.Mutex
	if err := a.Engine.AddAgent(agent.Spec{ID: "deployer"}, gatedCaller{}); err != nil {
		t.Fatal(err)
	}
	if err := a.Engine.RegisterTool(axocoatl.Tool{Name: "deploy", Approval: "prompt", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		mu.Lock()
		deployed++
		mu.Unlock()
		return axocoatl.ToolResult{Content: "deployed"}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b lists a's agents", func() bool {
		info, err := b.Engine.Agent("deployer")
		info2, err2 := b.Engine.Agent("alpha")
		return err == nil && err2 == nil && info.Node == "a" && info2.Node == "a"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// An event of b reaches a.
	sub, err := a.Engine.Bus().Subscribe(lattice.Filter{Types: []string{"Signed"}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := b.Engine.Publish(ctx, "Signed", "test", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.Events():
	case <-ctx.Done():
		t.Fatal("b's event did not reach a")
	}
	if res, err := b.Engine.Execute(ctx, "alpha", "signed task"); err != nil || !strings.Contains(res.Output, "signed task") {
		t.Fatalf("task through b on a: %+v %v", res, err)
	}
	// An approval raised on a, resolved from b.
	done := make(chan error, 1)
	go func() {
		res, err := b.Engine.Execute(ctx, "deployer", "ship")
		if err == nil && res.Output != "tool said: deployed" {
			err = fmt.Errorf("got %q", res.Output)
		}
		done <- err
	}()
	var id string
	waitFor(t, "the approval raised on a listed on b", func() bool {
		p := b.Approval.Pending()
		if len(p) == 1 {
			id = p[0].ApprovalID
		}
		return len(p) == 1
	})
	if err := b.Approval.Resolve(ctx, id, approval.Allow, approval.Once, "test-on-b"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, rt := range []*config.Runtime{a, b} {
		if n := rejectedAll(rt.Cluster.Keyring()); n != 0 {
			t.Errorf("a genuine message refused (%d)", n)
		}
	}

	// Valid credentials, another key: it connects, but cannot join.
	var logs testutil.SyncBuffer
	cfg, err := config.ParseWith(context.Background(), "c.yaml", []byte(withKey(daemonYAML(t, url, "c", "gamma", security("c")), wrongKey)), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.Build(context.Background(), config.BuildOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = c.Close(cctx)
	})
	ka := a.Cluster.Keyring()
	waitFor(t, "c refuses a's announcements and a refuses c's", func() bool {
		return c.Cluster.Keyring().Rejected(clustersig.UnknownKey) > 0 && ka.Rejected(clustersig.UnknownKey) > 0
	})
	if _, err := c.Engine.Agent("alpha"); err == nil {
		t.Error("the daemon with another key lists a's agent")
	}
	if _, err := a.Engine.Agent("gamma"); err == nil {
		t.Error("a lists the agent of the daemon with another key")
	}
	says := logs.String()
	for _, want := range []string{"cluster message refused: announcement", "reason=unknown_key", "neither cluster.key (id " + clustersig.KeyID(wrongKey) + ")", "nor one of cluster.accepted_keys"} {
		if !strings.Contains(says, want) {
			t.Errorf("c's log does not say %q:\n%s", want, says)
		}
	}
	if strings.Contains(says, wrongKey) || strings.Contains(says, key) {
		t.Error("a key in the log")
	}
}

func rejectedAll(k *clustersig.Keyring) uint64 {
	var n uint64
	for _, r := range clustersig.Reasons() {
		n += k.Rejected(r)
	}
	return n
}

// doctor says whether the daemons' messages are signed: a warning without
// cluster.key, the key ids (never a key) with one.
func TestDoctorSaysClusterKey(t *testing.T) {
	ns := natstest.Start(t, &server.Options{})
	const key, old = "doctor-cluster-key-0123456789abc", "doctor-old-key-0123456789abcdef"
	for _, tc := range []struct{ name, yaml, want string }{
		{"no key", "", "warn cluster key: cluster.key is not set"},
		{"key", "  key: " + key + "\n  accepted_keys: [" + old + "]\n", "ok   cluster key: messages signed with key id " + clustersig.KeyID(key) + ", also accepting key ids " + clustersig.KeyID(old)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(daemonYAML(t, ns.ClientURL(), "doc", "a", ""), "cluster:\n", "cluster:\n"+tc.yaml, 1)
			cfg, err := config.ParseWith(context.Background(), "d.yaml", []byte(src), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			cfg.Doctor(context.Background()).Print(&out)
			if !strings.Contains(out.String(), tc.want) || strings.Contains(out.String(), key) || strings.Contains(out.String(), old) {
				t.Fatalf("want %q, and no key, in:\n%s", tc.want, out.String())
			}
		})
	}
	// A short key is refused at load, at its key, unnamed.
	src := strings.Replace(daemonYAML(t, ns.ClientURL(), "doc", "a", ""), "cluster:\n", "cluster:\n  key: short-key\n", 1)
	_, err := config.ParseWith(context.Background(), "d.yaml", []byte(src), env(nil))
	if err == nil || !strings.Contains(err.Error(), "cluster.key") || strings.Contains(err.Error(), "short-key") {
		t.Fatalf("a short key: %v", err)
	}
}
