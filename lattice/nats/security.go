package nats

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Security is how a [Bus] made by [Connect] proves itself to the NATS
// server and protects the connection: one way of authenticating ([Auth])
// and TLS ([TLS]). The zero value is no credentials (beyond any in the URL)
// and TLS only when the URL is tls:// or the server asks for it, verified
// against the system's roots. Files are read when [Connect] dials and again
// at each reconnect, so a rotated certificate or creds file is picked up
// without a restart; [Security.Validate] reads them once to refuse a
// broken one early.
type Security struct {
	Auth Auth `yaml:"auth"`
	TLS  TLS  `yaml:"tls"`
}

// Auth is one of the ways NATS authenticates a client; at most one is set.
type Auth struct {
	// CredsFile is a NATS .creds file (a user JWT and its nkey seed, as
	// `nsc generate creds` writes it), for servers in operator (JWT) mode.
	// Zero: none.
	CredsFile string `yaml:"creds_file"`
	// NKeySeedFile holds a user nkey seed (SU…), for a server whose users
	// are nkeys. Zero: none.
	NKeySeedFile string `yaml:"nkey_seed_file"`
	// User and Password, for a server with users and passwords. Zero: none.
	User     string        `yaml:"user"`
	Password secret.Secret `yaml:"password"`
	// Token, for a server with an authorization token. Zero: none.
	Token secret.Secret `yaml:"token"`
}

// TLS protects the connection. Setting any field turns TLS on.
type TLS struct {
	// CAFile is a PEM file of the certificates that sign the server's
	// (a private CA). Zero: the system's roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are this client's certificate and its key (PEM),
	// for a server that verifies clients (`verify: true`). Both or neither.
	// Zero: no client certificate.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the server's certificate must carry. Zero: the
	// host of the URL dialed.
	ServerName string `yaml:"server_name"`
}

// Enabled reports whether any TLS setting is given.
func (t TLS) Enabled() bool { return t != TLS{} }

// Method names the way of authenticating that is set, as the key a config
// file sets it with ("creds_file", "nkey_seed_file", "user", "token"), or
// "" for none.
func (a Auth) Method() string {
	switch {
	case a.CredsFile != "":
		return "creds_file"
	case a.NKeySeedFile != "":
		return "nkey_seed_file"
	case a.User != "" || !a.Password.IsZero():
		return "user"
	case !a.Token.IsZero():
		return "token"
	}
	return ""
}

// maxSecurityFileBytes bounds each creds, seed, certificate or key file
// read: such files are a few KiB.
const maxSecurityFileBytes = 1 << 20

// readSmall reads a file of at most maxSecurityFileBytes; its errors name
// the path (never the contents).
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read: %w", path, errors.Unwrap(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecurityFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read: %w", path, err)
	}
	if len(b) > maxSecurityFileBytes {
		return nil, fmt.Errorf("%s is larger than 1 MiB: not a creds, key or certificate file", path)
	}
	return b, nil
}

// Validate checks the settings and the files they name: one way of
// authenticating at most, files that exist and parse (a creds file's JWT
// is a user's, unexpired, and its seed is that user's key; a seed is a
// user's; a certificate comes with its key, and they match). Its errors
// are *cfgerr.Error keyed as the yaml tags ("auth.creds_file",
// "tls.key_file") and never contain a secret or a file's contents.
func (s Security) Validate() error {
	var errs []error
	a := s.Auth
	set := 0
	for _, on := range []bool{a.CredsFile != "", a.NKeySeedFile != "", a.User != "" || !a.Password.IsZero(), !a.Token.IsZero()} {
		if on {
			set++
		}
	}
	if set > 1 {
		errs = append(errs, cfgerr.Errorf("auth", "set one of creds_file, nkey_seed_file, user and password, token (a NATS user authenticates one way)"))
	}
	if a.CredsFile != "" {
		if err := checkCreds(a.CredsFile); err != nil {
			errs = append(errs, cfgerr.Errorf("auth.creds_file", "%v", err))
		}
	}
	if a.NKeySeedFile != "" {
		if err := checkSeed(a.NKeySeedFile); err != nil {
			errs = append(errs, cfgerr.Errorf("auth.nkey_seed_file", "%v", err))
		}
	}
	if a.User != "" && a.Password.IsZero() {
		errs = append(errs, cfgerr.Errorf("auth.password", "is required with auth.user"))
	}
	if a.User == "" && !a.Password.IsZero() {
		errs = append(errs, cfgerr.Errorf("auth.user", "is required with auth.password"))
	}
	t := s.TLS
	if t.CAFile != "" {
		if err := checkCA(t.CAFile); err != nil {
			errs = append(errs, cfgerr.Errorf("tls.ca_file", "%v", err))
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		errs = append(errs, cfgerr.Errorf("tls.key_file", "is required with tls.cert_file (the client certificate's private key)"))
	case t.CertFile == "" && t.KeyFile != "":
		errs = append(errs, cfgerr.Errorf("tls.cert_file", "is required with tls.key_file"))
	case t.CertFile != "":
		if key, err := checkCertPair(t.CertFile, t.KeyFile); err != nil {
			errs = append(errs, cfgerr.Errorf("tls."+key, "%v", err))
		}
	}
	if strings.ContainsAny(t.ServerName, " \t\r\n/:") && net.ParseIP(t.ServerName) == nil {
		errs = append(errs, cfgerr.Errorf("tls.server_name", "want a host name, without scheme, port or spaces"))
	}
	return errors.Join(errs...)
}

func checkCreds(path string) error {
	b, err := readSmall(path)
	if err != nil {
		return err
	}
	tok, err := jwt.ParseDecoratedJWT(b)
	if err != nil || tok == "" || tok == string(b) {
		return fmt.Errorf("%s is not a NATS creds file (want the \"BEGIN NATS USER JWT\" and \"BEGIN USER NKEY SEED\" blocks `nsc generate creds` writes)", path)
	}
	claims, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return fmt.Errorf("%s: its JWT is not a NATS user JWT", path)
	}
	if claims.Expires != 0 && time.Unix(claims.Expires, 0).Before(time.Now()) {
		return fmt.Errorf("%s: its user JWT expired at %s: issue new credentials", path, time.Unix(claims.Expires, 0).UTC().Format(time.RFC3339))
	}
	kp, err := jwt.ParseDecoratedNKey(b)
	if err != nil {
		return fmt.Errorf("%s holds no user nkey seed (the \"BEGIN USER NKEY SEED\" block)", path)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil || pub != claims.Subject {
		return fmt.Errorf("%s: its nkey seed is not the key of its user JWT (the file was assembled from two users)", path)
	}
	return nil
}

func checkSeed(path string) error {
	b, err := readSmall(path)
	if err != nil {
		return err
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return fmt.Errorf("%s holds no nkey seed (want a line starting SU, as `nk -gen user` writes)", path)
	}
	defer kp.Wipe()
	if _, err := kp.Seed(); err != nil {
		return fmt.Errorf("%s holds a public key, not a seed (want the SU… line)", path)
	}
	if pub, err := kp.PublicKey(); err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return fmt.Errorf("%s holds the seed of an account or operator key: a client needs a user seed (SU…)", path)
	}
	return nil
}

func checkCA(path string) error {
	b, err := readSmall(path)
	if err != nil {
		return err
	}
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return fmt.Errorf("%s: a certificate in it does not parse", path)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("%s holds no PEM certificate (\"BEGIN CERTIFICATE\")", path)
	}
	return nil
}

// checkCertPair returns which key ("cert_file" or "key_file") is at fault.
func checkCertPair(certFile, keyFile string) (string, error) {
	cb, err := readSmall(certFile)
	if err != nil {
		return "cert_file", err
	}
	kb, err := readSmall(keyFile)
	if err != nil {
		return "key_file", err
	}
	if blk, _ := pem.Decode(cb); blk == nil || blk.Type != "CERTIFICATE" {
		return "cert_file", fmt.Errorf("%s holds no PEM certificate (\"BEGIN CERTIFICATE\")", certFile)
	}
	cert, err := tls.X509KeyPair(cb, kb)
	if err != nil {
		// tls's errors say what is wrong without quoting the key.
		return "key_file", fmt.Errorf("%s is not the key of %s, or does not parse (%v)", keyFile, certFile, err)
	}
	if leaf := cert.Leaf; leaf != nil && leaf.NotAfter.Before(time.Now()) {
		return "cert_file", fmt.Errorf("%s expired at %s", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return "", nil
}

// NATSOptions are the nats.go options that apply s (the files are read at
// each connection). It checks nothing [Security.Validate] does not.
func (s Security) NATSOptions() ([]natsgo.Option, error) {
	var opts []natsgo.Option
	a := s.Auth
	switch {
	case a.CredsFile != "":
		opts = append(opts, natsgo.UserCredentials(a.CredsFile))
	case a.NKeySeedFile != "":
		o, err := natsgo.NkeyOptionFromSeed(a.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("%w: auth.nkey_seed_file %s: %w", ErrBadCredentials, a.NKeySeedFile, err)
		}
		opts = append(opts, o)
	case a.User != "":
		opts = append(opts, natsgo.UserInfo(a.User, a.Password.Reveal()))
	case !a.Token.IsZero():
		opts = append(opts, natsgo.Token(a.Token.Reveal()))
	}
	t := s.TLS
	if t.Enabled() {
		// Secure first: RootCAs and ClientCert add to this config.
		opts = append(opts, natsgo.Secure(&tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}))
		if t.CAFile != "" {
			opts = append(opts, natsgo.RootCAs(t.CAFile))
		}
		if t.CertFile != "" {
			opts = append(opts, natsgo.ClientCert(t.CertFile, t.KeyFile))
		}
	}
	return opts, nil
}

// The three ways [Connect] fails, told apart (errors.Is) so an operator
// knows what to fix; each error also says it in words.
var (
	// ErrBadCredentials: the server refused this client's credentials (or
	// wants some and got none), or they could not be read.
	ErrBadCredentials = errors.New("NATS refused the credentials")
	// ErrTLSFailed: the TLS handshake failed: the server's certificate was
	// not trusted or not for the name dialed, or the server refused this
	// client's certificate, or one side wants TLS and the other does not.
	ErrTLSFailed = errors.New("TLS with NATS failed")
	// ErrUnreachable: no server answered at the URL.
	ErrUnreachable = errors.New("NATS server unreachable")
)

// explain wraps a connect error of nats.go in the sentinel of its kind with
// what to do about it. It never includes a credential: nats.go's errors
// name none, and the hints name settings and files only.
func explain(err error, sec Security) error {
	a := sec.Auth
	who := "no credentials (the server wants some: set lattice.auth)"
	switch a.Method() {
	case "creds_file":
		who = "the creds file " + a.CredsFile + " (is its user in the server's account, unrevoked and unexpired?)"
	case "nkey_seed_file":
		who = "the nkey seed in " + a.NKeySeedFile + " (is its public key among the server's users?)"
	case "user":
		who = "user " + a.User + " and its password"
	case "token":
		who = "the token"
	}
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		recHeader tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, natsgo.ErrAuthorization), errors.Is(err, natsgo.ErrAuthExpired),
		errors.Is(err, natsgo.ErrAuthRevoked), errors.Is(err, natsgo.ErrAccountAuthExpired):
		return fmt.Errorf("%w: it refused %s: %w", ErrBadCredentials, who, err)
	case errors.As(err, &unknownCA):
		hint := "set lattice.tls.ca_file to the CA that signs the server's certificate"
		if sec.TLS.CAFile != "" {
			hint = sec.TLS.CAFile + " does not hold the CA that signs it"
		}
		return fmt.Errorf("%w: the server's certificate is signed by an unknown authority: %s: %w", ErrTLSFailed, hint, err)
	case errors.As(err, &hostname):
		return fmt.Errorf("%w: the server's certificate is not for the name dialed (set lattice.tls.server_name to a name it carries): %w", ErrTLSFailed, err)
	case errors.As(err, &invalid):
		return fmt.Errorf("%w: the server's certificate is not valid (expired, or not for a server): %w", ErrTLSFailed, err)
	case remoteAlert(err), errors.Is(err, natsgo.ErrTLS) && strings.Contains(err.Error(), "after TLS handshake"):
		// TLS 1.3: the server checks the client's certificate after the
		// client's handshake is done, and refuses with an alert or by
		// closing the connection.
		hint := "the server refused this client's certificate: is lattice.tls.cert_file signed by a CA the server trusts, and unexpired?"
		if sec.TLS.CertFile == "" {
			hint = "the server wants a client certificate: set lattice.tls.cert_file and key_file"
		}
		return fmt.Errorf("%w: %s: %w", ErrTLSFailed, hint, err)
	case errors.As(err, &recHeader):
		return fmt.Errorf("%w: the server does not speak TLS there (use a nats:// URL and no lattice.tls, or the server's TLS port): %w", ErrTLSFailed, err)
	case errors.Is(err, natsgo.ErrSecureConnRequired):
		return fmt.Errorf("%w: the server requires TLS: use a tls:// URL or set lattice.tls: %w", ErrTLSFailed, err)
	case errors.Is(err, natsgo.ErrSecureConnWanted):
		return fmt.Errorf("%w: lattice.tls is set (or the URL is tls://) but the server offers no TLS: %w", ErrTLSFailed, err)
	case errors.Is(err, natsgo.ErrTLS):
		return fmt.Errorf("%w: %w", ErrTLSFailed, err)
	}
	var nerr net.Error
	var operr *net.OpError
	if errors.Is(err, natsgo.ErrNoServers) || errors.As(err, &operr) || errors.As(err, &nerr) && nerr.Timeout() ||
		errors.Is(err, io.EOF) || errors.Is(err, natsgo.ErrTimeout) {
		return fmt.Errorf("%w: nothing answered (is nats-server running there, the port open, the host name right?): %w", ErrUnreachable, err)
	}
	return err
}

// remoteAlert reports whether err is a TLS alert the server sent (crypto/tls
// gives it as a *net.OpError "remote error"): a refused client certificate.
func remoteAlert(err error) bool {
	var operr *net.OpError
	var alert tls.AlertError
	return errors.As(err, &operr) && operr.Op == "remote error" || errors.As(err, &alert)
}
