package nats_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/internal/natstest"
	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
	"github.com/axocoatl/axocoatl-go/secret"
)

// connectSec dials url with sec; the Bus is closed at the test's end.
func connectSec(t *testing.T, url string, sec latticenats.Security) (*latticenats.Bus, error) {
	t.Helper()
	b, err := latticenats.Connect(url, latticenats.Options{Security: sec})
	if err == nil {
		t.Cleanup(func() { b.Close() })
	}
	return b, err
}

// crosses checks that an event published on a reaches a subscriber on b.
func crosses(t *testing.T, a, b *latticenats.Bus) {
	t.Helper()
	sub, err := b.Subscribe(lattice.Filter{Types: []string{"sec.test"}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	publish(t, a, "sec.test", 7)
	if typ, n := receive(t, sub); typ != "sec.test" || n != 7 {
		t.Fatalf("got %s %d", typ, n)
	}
}

// A server with TLS (client certificates verified) and nkey users: two
// Buses with their seeds and certificates share events; a wrong seed, a
// certificate of another CA, no certificate, an untrusted server
// certificate and a wrong server name are each refused, and the error says
// which (and never holds the seed).
func TestTLSAndNKeyAuth(t *testing.T) {
	pki := natstest.NewPKI(t)
	dir := t.TempDir()
	seedA, pubA := natstest.NKeyUser(t, dir, "a")
	seedB, pubB := natstest.NKeyUser(t, dir, "b")
	stranger, _ := natstest.NKeyUser(t, dir, "stranger")
	ns := natstest.Start(t, &server.Options{
		TLSConfig: pki.ServerTLS(t), TLSVerify: true, TLSTimeout: 5,
		Nkeys: []*server.NkeyUser{{Nkey: pubA}, {Nkey: pubB}},
	})
	url := natstest.TLSURL(ns)
	good := func(seed string) latticenats.Security {
		return latticenats.Security{
			Auth: latticenats.Auth{NKeySeedFile: seed},
			TLS:  latticenats.TLS{CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey},
		}
	}
	for _, s := range []latticenats.Security{good(seedA), good(seedB)} {
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	a, err := connectSec(t, url, good(seedA))
	if err != nil {
		t.Fatal(err)
	}
	b, err := connectSec(t, url, good(seedB))
	if err != nil {
		t.Fatal(err)
	}
	crosses(t, a, b)
	crosses(t, b, a)

	other := natstest.NewPKI(t) // a CA the server does not trust
	seedBytes, _ := os.ReadFile(stranger)
	for _, tc := range []struct {
		name string
		sec  func(latticenats.Security) latticenats.Security
		want error
		says string
	}{
		{"unknown nkey", func(s latticenats.Security) latticenats.Security { s.Auth.NKeySeedFile = stranger; return s }, latticenats.ErrBadCredentials, "nkey seed in " + stranger},
		{"no credentials", func(s latticenats.Security) latticenats.Security { s.Auth = latticenats.Auth{}; return s }, latticenats.ErrBadCredentials, "set lattice.auth"},
		{"client cert of another CA", func(s latticenats.Security) latticenats.Security {
			s.TLS.CertFile, s.TLS.KeyFile = other.ClientCert, other.ClientKey
			return s
		}, latticenats.ErrTLSFailed, "refused this client's certificate"},
		{"no client cert", func(s latticenats.Security) latticenats.Security { s.TLS.CertFile, s.TLS.KeyFile = "", ""; return s }, latticenats.ErrTLSFailed, "wants a client certificate"},
		{"server cert of an unknown CA", func(s latticenats.Security) latticenats.Security { s.TLS.CAFile = other.CAFile; return s }, latticenats.ErrTLSFailed, "unknown authority: " + other.CAFile},
		{"system roots", func(s latticenats.Security) latticenats.Security { s.TLS.CAFile = ""; return s }, latticenats.ErrTLSFailed, "set lattice.tls.ca_file"},
		{"wrong server name", func(s latticenats.Security) latticenats.Security { s.TLS.ServerName = "nats.example"; return s }, latticenats.ErrTLSFailed, "server_name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := connectSec(t, url, tc.sec(good(seedA)))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("want %v saying %q, got %v", tc.want, tc.says, err)
			}
			if strings.Contains(err.Error(), strings.TrimSpace(string(seedBytes))) {
				t.Fatalf("the error holds the seed: %v", err)
			}
		})
	}
	// Plain nats:// to a TLS server: still TLS (the server asks), still
	// verified.
	if _, err := connectSec(t, ns.ClientURL(), latticenats.Security{Auth: latticenats.Auth{NKeySeedFile: seedA}}); !errors.Is(err, latticenats.ErrTLSFailed) {
		t.Fatalf("nats:// to a TLS server without a CA: %v", err)
	}
}

// Operator (JWT) mode: users with creds files made by jwt/v2 join; a user
// of an account the operator never signed is refused as bad credentials.
func TestCredsFileAuth(t *testing.T) {
	op := natstest.NewOperator(t)
	opts := &server.Options{}
	op.Configure(t, opts)
	ns := natstest.Start(t, opts)
	dir := t.TempDir()
	credsA, credsB := op.Creds(t, dir, "a"), op.Creds(t, dir, "b")
	sec := func(f string) latticenats.Security { return latticenats.Security{Auth: latticenats.Auth{CredsFile: f}} }
	if err := sec(credsA).Validate(); err != nil {
		t.Fatal(err)
	}
	a, err := connectSec(t, ns.ClientURL(), sec(credsA))
	if err != nil {
		t.Fatal(err)
	}
	b, err := connectSec(t, ns.ClientURL(), sec(credsB))
	if err != nil {
		t.Fatal(err)
	}
	crosses(t, a, b)
	foreign := natstest.ForeignCreds(t, dir, "foreign")
	if err := sec(foreign).Validate(); err != nil {
		t.Fatalf("a well-formed creds file: %v", err)
	}
	_, err = connectSec(t, ns.ClientURL(), sec(foreign))
	if !errors.Is(err, latticenats.ErrBadCredentials) || !strings.Contains(err.Error(), "creds file "+foreign) {
		t.Fatalf("foreign creds: %v", err)
	}
	if _, err := connectSec(t, ns.ClientURL(), latticenats.Security{}); !errors.Is(err, latticenats.ErrBadCredentials) {
		t.Fatalf("no creds: %v", err)
	}
}

// User/password and token servers; a wrong password is bad credentials
// and the error holds neither password.
func TestPasswordAndTokenAuth(t *testing.T) {
	ns := natstest.Start(t, &server.Options{Username: "axo", Password: "right-password-1"})
	if _, err := connectSec(t, ns.ClientURL(), latticenats.Security{Auth: latticenats.Auth{User: "axo", Password: "right-password-1"}}); err != nil {
		t.Fatal(err)
	}
	_, err := connectSec(t, ns.ClientURL(), latticenats.Security{Auth: latticenats.Auth{User: "axo", Password: secret.Secret("wrong-password-2")}})
	if !errors.Is(err, latticenats.ErrBadCredentials) || strings.Contains(err.Error(), "password-") || !strings.Contains(err.Error(), "user axo") {
		t.Fatalf("wrong password: %v", err)
	}
	tok := natstest.Start(t, &server.Options{Authorization: "the-token-0123456789"})
	if _, err := connectSec(t, tok.ClientURL(), latticenats.Security{Auth: latticenats.Auth{Token: "the-token-0123456789"}}); err != nil {
		t.Fatal(err)
	}
	_, err = connectSec(t, tok.ClientURL(), latticenats.Security{Auth: latticenats.Auth{Token: "not-the-token-987654"}})
	if !errors.Is(err, latticenats.ErrBadCredentials) || strings.Contains(err.Error(), "token-") {
		t.Fatalf("wrong token: %v", err)
	}
}

// A port nobody listens on is unreachable, not a credentials problem.
func TestUnreachable(t *testing.T) {
	ns := natstest.Start(t, &server.Options{})
	url := ns.ClientURL()
	ns.Shutdown()
	ns.WaitForShutdown()
	_, err := latticenats.Connect(url, latticenats.Options{})
	if !errors.Is(err, latticenats.ErrUnreachable) || errors.Is(err, latticenats.ErrBadCredentials) {
		t.Fatalf("%v", err)
	}
}

// Validate reads the files: each broken one is refused at its key, saying
// what is wrong, never with the file's contents.
func TestSecurityValidate(t *testing.T) {
	pki := natstest.NewPKI(t)
	dir := t.TempDir()
	seed, _ := natstest.NKeyUser(t, dir, "u")
	op := natstest.NewOperator(t)
	creds := op.Creds(t, dir, "c")
	credsBytes, _ := os.ReadFile(creds)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A creds file whose seed is another user's.
	other := op.Creds(t, dir, "other")
	otherBytes, _ := os.ReadFile(other)
	jwtPart := string(credsBytes)[:strings.Index(string(credsBytes), "************************* IMPORTANT")]
	seedPart := string(otherBytes)[strings.Index(string(otherBytes), "************************* IMPORTANT"):]
	mixed := write("mixed.creds", jwtPart+seedPart)
	expiredCert, expiredKey := pki.Issue(t, "old", false, time.Now().Add(-time.Minute))
	for _, tc := range []struct {
		name string
		sec  latticenats.Security
		key  string
		says string
	}{
		{"missing creds", latticenats.Security{Auth: latticenats.Auth{CredsFile: filepath.Join(dir, "nope.creds")}}, "auth.creds_file", "cannot be read"},
		{"not creds", latticenats.Security{Auth: latticenats.Auth{CredsFile: write("junk.creds", "hello\n")}}, "auth.creds_file", "not a NATS creds file"},
		{"seed of another user", latticenats.Security{Auth: latticenats.Auth{CredsFile: mixed}}, "auth.creds_file", "not the key of its user JWT"},
		{"a seed as creds", latticenats.Security{Auth: latticenats.Auth{CredsFile: seed}}, "auth.creds_file", "not a NATS creds file"},
		{"not a seed", latticenats.Security{Auth: latticenats.Auth{NKeySeedFile: write("junk.nk", "SUxyz\n")}}, "auth.nkey_seed_file", "no nkey seed"},
		{"two methods", latticenats.Security{Auth: latticenats.Auth{NKeySeedFile: seed, Token: "tok"}}, "auth", "set one of"},
		{"user without password", latticenats.Security{Auth: latticenats.Auth{User: "u"}}, "auth.password", "required"},
		{"cert without key", latticenats.Security{TLS: latticenats.TLS{CertFile: pki.ClientCert}}, "tls.key_file", "required"},
		{"key of another cert", latticenats.Security{TLS: latticenats.TLS{CertFile: pki.ClientCert, KeyFile: pki.ServerKey}}, "tls.key_file", "is not the key of"},
		{"expired cert", latticenats.Security{TLS: latticenats.TLS{CertFile: expiredCert, KeyFile: expiredKey}}, "tls.cert_file", "expired"},
		{"CA not PEM", latticenats.Security{TLS: latticenats.TLS{CAFile: pki.ClientKey}}, "tls.ca_file", "no PEM certificate"},
		{"missing CA", latticenats.Security{TLS: latticenats.TLS{CAFile: filepath.Join(dir, "nope.pem")}}, "tls.ca_file", "cannot be read"},
		{"a device as CA", latticenats.Security{TLS: latticenats.TLS{CAFile: "/dev/zero"}}, "tls.ca_file", "larger than 1 MiB"},
		{"server name with port", latticenats.Security{TLS: latticenats.TLS{ServerName: "host:4222"}}, "tls.server_name", "host name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.sec.Validate()
			var ce *cfgerr.Error
			if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(ce.Msg, tc.says) {
				t.Fatalf("want %s: …%s…, got %v", tc.key, tc.says, err)
			}
			// Connect refuses it too, before dialing.
			if _, cerr := latticenats.Connect("nats://127.0.0.1:1", latticenats.Options{Security: tc.sec}); !errors.Is(cerr, cfgerr.ErrInvalid) {
				t.Fatalf("Connect: %v", cerr)
			}
			for _, line := range strings.Split(string(credsBytes)+string(otherBytes), "\n") {
				if len(line) > 20 && strings.Contains(err.Error(), line) {
					t.Fatalf("the error quotes a file: %v", err)
				}
			}
		})
	}
}

// The certificate files are read again at each reconnect: a client
// certificate replaced on disk (here by one the server's CA does not sign)
// is what the next connection presents, without a new Bus.
func TestCertificateReadAtReconnect(t *testing.T) {
	pki := natstest.NewPKI(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "c-key.pem")
	cp := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cp(pki.ClientCert, certFile)
	cp(pki.ClientKey, keyFile)
	opts := func(port int) *server.Options {
		return &server.Options{Port: port, TLSConfig: pki.ServerTLS(t), TLSVerify: true, TLSTimeout: 5}
	}
	ns := natstest.Start(t, opts(0))
	port := ns.Addr().(*net.TCPAddr).Port
	reconnectErr := make(chan error, 16)
	sec := latticenats.Security{TLS: latticenats.TLS{CAFile: pki.CAFile, CertFile: certFile, KeyFile: keyFile}}
	b, err := latticenats.Connect(natstest.TLSURL(ns), latticenats.Options{Security: sec},
		natsgo.ReconnectWait(20*time.Millisecond), natsgo.MaxReconnects(-1),
		// nats.go reports a failed reconnect's TLS error to the error handler.
		natsgo.ErrorHandler(func(_ *natsgo.Conn, _ *natsgo.Subscription, err error) {
			select {
			case reconnectErr <- err:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	other := natstest.NewPKI(t)
	cp(other.ClientCert, certFile)
	cp(other.ClientKey, keyFile)
	ns.Shutdown()
	ns.WaitForShutdown()
	natstest.Start(t, opts(port))
	select {
	case err := <-reconnectErr:
		if !errors.Is(err, natsgo.ErrTLS) && !strings.Contains(err.Error(), "tls") {
			t.Fatalf("reconnect error %v, want the server refusing the new certificate", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the reconnect with the replaced certificate did not fail")
	}
}
