// Package natstest starts real nats-servers with TLS and authentication
// for tests: a CA and certificates made on the spot (crypto/x509, nothing
// committed), nkey users, and operator (JWT) mode with users made by
// github.com/nats-io/jwt/v2, written as the files a daemon reads.
package natstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// PKI is a CA and the files of certificates it signed, in a test's
// temporary directory.
type PKI struct {
	Dir    string
	CAFile string
	// ServerCert and ServerKey are for 127.0.0.1 and localhost.
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client certificate of this CA.
	ClientCert, ClientKey string

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

// NewPKI makes a CA, a server certificate and a client certificate.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "natstest CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{Dir: t.TempDir(), ca: ca, caKey: key}
	p.CAFile = p.write(t, "ca.pem", "CERTIFICATE", der)
	p.ServerCert, p.ServerKey = p.Issue(t, "server", true, time.Now().Add(24*time.Hour))
	p.ClientCert, p.ClientKey = p.Issue(t, "client", false, time.Now().Add(24*time.Hour))
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// Issue signs a certificate named name (a server's for 127.0.0.1 and
// localhost, else a client's), valid until notAfter, and returns its
// certificate and key files.
func (p *PKI) Issue(t testing.TB, name string, isServer bool, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	sn, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: sn.Add(sn, big.NewInt(2)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if isServer {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+"-key.pem", "EC PRIVATE KEY", kder)
}

func (p *PKI) write(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.Dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ServerTLS is the server's TLS config: its certificate, and clients'
// certificates required and verified against the CA.
func (p *PKI) ServerTLS(t testing.TB) *tls.Config {
	t.Helper()
	cfg, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: p.ServerCert, KeyFile: p.ServerKey, CaFile: p.CAFile, Verify: true, Timeout: 5})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Start runs a nats-server with opts on 127.0.0.1 and a free port
// (unless opts says otherwise), stopped at the test's end.
func Start(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = -1
	}
	opts.NoLog, opts.NoSigs = true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

// TLSURL is the server's client URL with the tls:// scheme.
func TLSURL(ns *server.Server) string {
	return "tls://" + ns.Addr().String()
}

// NKeyUser makes a user nkey, writes its seed to a file in dir and
// returns the file and the public key (for server.Options.Nkeys).
func NKeyUser(t testing.TB, dir, name string) (seedFile, public string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	public, _ = kp.PublicKey()
	seedFile = filepath.Join(dir, name+".nk")
	if err := os.WriteFile(seedFile, append(seed, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return seedFile, public
}

// Operator is an operator and one account, for a server in operator
// (JWT) mode.
type Operator struct {
	opKey, accKey nkeys.KeyPair
	opJWT, accJWT string
	accPub        string
}

// NewOperator makes an operator and an account it signs.
func NewOperator(t testing.TB) *Operator {
	t.Helper()
	o := &Operator{}
	var err error
	if o.opKey, err = nkeys.CreateOperator(); err != nil {
		t.Fatal(err)
	}
	opPub, _ := o.opKey.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "natstest"
	if o.opJWT, err = oc.Encode(o.opKey); err != nil {
		t.Fatal(err)
	}
	if o.accKey, err = nkeys.CreateAccount(); err != nil {
		t.Fatal(err)
	}
	o.accPub, _ = o.accKey.PublicKey()
	ac := jwt.NewAccountClaims(o.accPub)
	ac.Name = "axocoatl"
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	if o.accJWT, err = ac.Encode(o.opKey); err != nil {
		t.Fatal(err)
	}
	return o
}

// Configure sets opts for operator mode with this operator trusted and
// its account resolved from memory.
func (o *Operator) Configure(t testing.TB, opts *server.Options) {
	t.Helper()
	oc, err := jwt.DecodeOperatorClaims(o.opJWT)
	if err != nil {
		t.Fatal(err)
	}
	opts.TrustedOperators = []*jwt.OperatorClaims{oc}
	r := &server.MemAccResolver{}
	if err := r.Store(o.accPub, o.accJWT); err != nil {
		t.Fatal(err)
	}
	opts.AccountResolver = r
}

// Creds makes a user of the account and writes its creds file in dir.
func (o *Operator) Creds(t testing.TB, dir, name string) string {
	t.Helper()
	return writeCreds(t, dir, name, o.accKey)
}

// ForeignCreds writes the creds file of a user signed by an account this
// server does not know: well-formed, and refused.
func ForeignCreds(t testing.TB, dir, name string) string {
	t.Helper()
	acc, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	return writeCreds(t, dir, name, acc)
}

func writeCreds(t testing.TB, dir, name string, acc nkeys.KeyPair) string {
	t.Helper()
	uk, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	upub, _ := uk.PublicKey()
	uc := jwt.NewUserClaims(upub)
	uc.Name = name
	ujwt, err := uc.Encode(acc)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := uk.Seed()
	creds, err := jwt.FormatUserConfig(ujwt, seed)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
