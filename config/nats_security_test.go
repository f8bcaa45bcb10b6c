package config_test

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

	"github.com/nats-io/nats-server/v2/server"

	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/internal/natstest"
	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// secureNATS is a nats-server in operator (JWT) mode with TLS that
// verifies client certificates: the PKI, the operator, and the server.
func secureNATS(t *testing.T) (*natstest.PKI, *natstest.Operator, *server.Server) {
	t.Helper()
	pki := natstest.NewPKI(t)
	op := natstest.NewOperator(t)
	opts := &server.Options{TLSConfig: pki.ServerTLS(t), TLSVerify: true, TLSTimeout: 5}
	op.Configure(t, opts)
	return pki, op, natstest.Start(t, opts)
}

// daemonYAML is a daemon's config on the secure server: node, its agent,
// and the lattice's auth and tls keys (YAML lines under lattice:, already
// indented).
func daemonYAML(t *testing.T, url, node, agentID, security string) string {
	return fmt.Sprintf("server:\n  data_dir: %s\nagents:\n  - id: %s\n    provider: echo\nconversations:\n  store: memory\n"+
		"cluster:\n  heartbeat_interval: 50ms\nlattice:\n  backend: nats\n  nats_url: %s\n  node: %s\n%s",
		t.TempDir(), agentID, url, node, security)
}

func buildDaemon(t *testing.T, src string, vars map[string]string) (*config.Runtime, error) {
	t.Helper()
	ctx := context.Background()
	cfg, err := config.ParseWith(ctx, "d.yaml", []byte(src), env(vars))
	if err != nil {
		return nil, err
	}
	rt, err := cfg.Build(ctx, config.BuildOptions{})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := rt.Close(cctx); err != nil {
			t.Error(err)
		}
	})
	return rt, nil
}

// Two daemons on a nats-server with TLS (client certificates verified)
// and JWT users, one with its settings in the file and one from the
// AXOCOATL_NATS_* variables: events and tasks cross them. A daemon with
// credentials of an account the server does not know, or a client
// certificate of another CA, cannot join: Build fails at the key to fix,
// saying why.
func TestDaemonsOnSecuredNATS(t *testing.T) {
	pki, op, ns := secureNATS(t)
	url := natstest.TLSURL(ns)
	dir := t.TempDir()
	tlsKeys := fmt.Sprintf("  tls:\n    ca_file: %s\n    cert_file: %s\n    key_file: %s\n", pki.CAFile, pki.ClientCert, pki.ClientKey)
	a, err := buildDaemon(t, daemonYAML(t, url, "a", "alpha", "  auth:\n    creds_file: "+op.Creds(t, dir, "a")+"\n"+tlsKeys), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := buildDaemon(t, daemonYAML(t, url, "b", "beta", ""), map[string]string{
		"AXOCOATL_NATS_CREDS": op.Creds(t, dir, "b"), "AXOCOATL_NATS_CA": pki.CAFile,
		"AXOCOATL_NATS_CERT": pki.ClientCert, "AXOCOATL_NATS_KEY": pki.ClientKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	// An event of a reaches b.
	sub, err := b.Engine.Bus().Subscribe(lattice.Filter{Types: []string{"Secured"}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx := context.Background()
	if err := a.Engine.Publish(ctx, "Secured", "test", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-sub.Events():
		if ev.Type != "Secured" {
			t.Fatalf("got %s", ev.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a's event did not reach b")
	}
	// A task for a's agent, through b.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if info, err := b.Engine.Agent("alpha"); err == nil && info.Node == "a" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b never listed a's agent")
		}
		time.Sleep(10 * time.Millisecond) // the announcement's arrival: no event to wait on
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := b.Engine.Execute(tctx, "alpha", "across TLS")
	if err != nil || !strings.Contains(res.Output, "across TLS") {
		t.Fatalf("task through b on a: %+v %v", res, err)
	}

	other := natstest.NewPKI(t)
	foreign := natstest.ForeignCreds(t, dir, "intruder")
	for _, tc := range []struct {
		name, security string
		want           error
		key, says      string
	}{
		{"foreign creds", "  auth:\n    creds_file: " + foreign + "\n" + tlsKeys, latticenats.ErrBadCredentials,
			"d.yaml:15: lattice.auth.creds_file", "refused the creds file " + foreign},
		{"no creds", tlsKeys, latticenats.ErrBadCredentials, "lattice.nats_url", "set lattice.auth"},
		{"cert of another CA", "  auth:\n    creds_file: " + op.Creds(t, dir, "c") + "\n" +
			fmt.Sprintf("  tls:\n    ca_file: %s\n    cert_file: %s\n    key_file: %s\n", pki.CAFile, other.ClientCert, other.ClientKey),
			latticenats.ErrTLSFailed, "d.yaml:16: lattice.tls", "refused this client's certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := buildDaemon(t, daemonYAML(t, url, "c", "gamma", tc.security), nil)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("want %v at %s saying %q, got %v", tc.want, tc.key, tc.says, err)
			}
			var fe *config.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("not a FieldError: %T", err)
			}
		})
	}
}

// Load refuses broken security settings at their key and line: a missing
// file, a creds file that does not parse, a certificate without its key,
// two ways of authenticating; from a variable, the variable is named.
func TestLatticeSecurityValidatedAtLoad(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.creds")
	if err := os.WriteFile(junk, []byte("not creds\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pki := natstest.NewPKI(t)
	head := "agents:\n  - id: a\nlattice:\n  backend: nats\n"
	for _, tc := range []struct {
		yaml string
		vars map[string]string
		want string
	}{
		{head + "  auth:\n    creds_file: " + filepath.Join(dir, "none.creds") + "\n", nil, "d.yaml:6: lattice.auth.creds_file: " + filepath.Join(dir, "none.creds") + " cannot be read"},
		{head + "  auth:\n    creds_file: " + junk + "\n", nil, "d.yaml:6: lattice.auth.creds_file: " + junk + " is not a NATS creds file"},
		{head + "  tls:\n    cert_file: " + pki.ClientCert + "\n", nil, "d.yaml:5: lattice.tls.key_file: is required with tls.cert_file"},
		{head + "  auth:\n    user: u\n    password: p4ss-in-file\n    token: t0ken-in-file\n", nil, "d.yaml:5: lattice.auth: set one of"},
		{head + "  nats_url: nats://u:p@127.0.0.1:4222\n  auth:\n    token: t0ken-in-file\n", nil, "d.yaml:5: lattice.nats_url: carries credentials"},
		{head, map[string]string{"AXOCOATL_NATS_NKEY": junk}, "AXOCOATL_NATS_NKEY: " + junk + " holds no nkey seed"},
		{head, map[string]string{"AXOCOATL_NATS_PASSWORD": "env-pass-123"}, "AXOCOATL_NATS_USER: is required with auth.password"},
		{head, map[string]string{"AXOCOATL_NATS_URL": "::bad"}, "AXOCOATL_NATS_URL: want nats://host:port"},
	} {
		_, err := config.ParseWith(context.Background(), "d.yaml", []byte(tc.yaml), env(tc.vars))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %v: error %v, want %q", tc.yaml, tc.vars, err, tc.want)
			continue
		}
		for _, s := range []string{"p4ss-in-file", "t0ken-in-file", "env-pass-123"} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("the error holds a secret: %v", err)
			}
		}
	}
	// In memory the keys are ignored, and said to be.
	cfg, err := config.ParseWith(context.Background(), "d.yaml", []byte("agents:\n  - id: a\nlattice:\n  auth:\n    creds_file: /nowhere\n"), env(nil))
	if err != nil || !strings.Contains(strings.Join(cfg.Warnings, "\n"), "lattice.auth is ignored") {
		t.Fatalf("%v %v", err, cfg)
	}
}

// doctor connects with the settings and says what failed, in words: bad
// credentials, TLS, unreachable; and how the connection is secured when it
// works. The password never shows.
func TestDoctorChecksNATSSecurity(t *testing.T) {
	pki, op, ns := secureNATS(t)
	url := natstest.TLSURL(ns)
	dir := t.TempDir()
	tlsKeys := fmt.Sprintf("  tls:\n    ca_file: %s\n    cert_file: %s\n    key_file: %s\n", pki.CAFile, pki.ClientCert, pki.ClientKey)
	pw := natstest.Start(t, &server.Options{Username: "axo", Password: "doctor-secret-pw"})
	down := natstest.Start(t, &server.Options{})
	downURL := down.ClientURL()
	down.Shutdown()
	down.WaitForShutdown()
	for _, tc := range []struct{ name, url, security, want string }{
		{"ok", url, "  auth:\n    creds_file: " + op.Creds(t, dir, "a") + "\n" + tlsKeys, "ok   lattice: NATS at " + url + " connected (TLS, CA " + pki.CAFile},
		{"bad creds", url, "  auth:\n    creds_file: " + natstest.ForeignCreds(t, dir, "x") + "\n" + tlsKeys, "FAIL lattice: NATS at " + url + ": NATS refused the credentials: it refused the creds file"},
		{"untrusted server", url, "  auth:\n    creds_file: " + op.Creds(t, dir, "b") + "\n", "TLS with NATS failed: the server's certificate is signed by an unknown authority: set lattice.tls.ca_file"},
		{"unreachable", downURL, "", "NATS server unreachable"},
		{"wrong password", pw.ClientURL(), "  auth:\n    user: axo\n    password: not-the-doctor-pw\n", "refused user axo and its password"},
		{"right password", pw.ClientURL(), "  auth:\n    user: axo\n    password: doctor-secret-pw\n", "connected (user axo)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.ParseWith(context.Background(), "d.yaml", []byte(daemonYAML(t, tc.url, "doc", "a", tc.security)), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			cfg.Doctor(context.Background()).Print(&out)
			if !strings.Contains(out.String(), tc.want) {
				t.Fatalf("want %q in:\n%s", tc.want, out.String())
			}
			if strings.Contains(out.String(), "doctor-secret-pw") || strings.Contains(out.String(), "not-the-doctor-pw") {
				t.Fatalf("a password shows:\n%s", out.String())
			}
		})
	}
}
