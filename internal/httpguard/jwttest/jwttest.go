// Package jwttest is an authorization server for tests: it signs JWT access
// tokens (RS256, ES256) and serves its key set and RFC 8414 metadata over
// a real httptest server, with keys that can be rotated.
package jwttest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// Key is a signing key with its kid.
type Key struct {
	Kid string
	RSA *rsa.PrivateKey
	EC  *ecdsa.PrivateKey
}

// NewRSA makes a 2048-bit RSA key.
func NewRSA(t testing.TB, kid string) Key {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return Key{Kid: kid, RSA: k}
}

// NewEC makes a P-256 key.
func NewEC(t testing.TB, kid string) Key {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return Key{Kid: kid, EC: k}
}

// Server is the authorization server.
type Server struct {
	*httptest.Server
	mu    sync.Mutex
	keys  []Key
	Hits  atomic.Int64 // JWKS fetches
	Extra []byte       // appended raw to the JWKS body, for bound tests
	Down  atomic.Bool  // while set, every endpoint answers 503 (an outage)
}

// New starts a server publishing keys.
func New(t testing.TB, keys ...Key) *Server {
	s := &Server{keys: keys}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		s.Hits.Add(1)
		s.mu.Lock()
		body := s.jwksLocked()
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": s.URL, "jwks_uri": s.URL + "/jwks",
			"token_endpoint": s.URL + "/token", "response_types_supported": []string{"code"}})
	})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// SetKeys replaces the published keys (a rotation).
func (s *Server) SetKeys(keys ...Key) {
	s.mu.Lock()
	s.keys = keys
	s.mu.Unlock()
}

func (s *Server) jwksLocked() []byte {
	var out []map[string]string
	for _, k := range s.keys {
		switch {
		case k.RSA != nil:
			out = append(out, map[string]string{"kty": "RSA", "kid": k.Kid, "use": "sig", "alg": "RS256",
				"n": b64(k.RSA.N.Bytes()), "e": b64(big.NewInt(int64(k.RSA.E)).Bytes())})
		case k.EC != nil:
			pt, err := k.EC.PublicKey.Bytes() // 0x04 || X || Y
			if err != nil || len(pt) != 65 {
				continue
			}
			out = append(out, map[string]string{"kty": "EC", "kid": k.Kid, "use": "sig", "crv": "P-256",
				"x": b64(pt[1:33]), "y": b64(pt[33:])})
		}
	}
	b, _ := json.Marshal(map[string]any{"keys": out})
	if len(s.Extra) > 0 {
		b = append(b[:len(b)-1], s.Extra...)
		b = append(b, '}')
	}
	return b
}

// Sign makes a compact JWS of claims with k (RS256 or ES256 by key type);
// alg, when set, overrides the header's alg (the signature stays k's).
func Sign(t testing.TB, k Key, claims map[string]any, alg string) string {
	t.Helper()
	if alg == "" {
		alg = "RS256"
		if k.EC != nil {
			alg = "ES256"
		}
	}
	hdr := map[string]any{"alg": alg, "typ": "at+jwt"}
	if k.Kid != "" {
		hdr["kid"] = k.Kid
	}
	h, _ := json.Marshal(hdr)
	c, _ := json.Marshal(claims)
	input := b64(h) + "." + b64(c)
	if alg == "none" {
		return input + "."
	}
	d := sha256.Sum256([]byte(input))
	var sig []byte
	var err error
	switch {
	case k.RSA != nil:
		sig, err = rsa.SignPKCS1v15(rand.Reader, k.RSA, crypto.SHA256, d[:])
	case k.EC != nil:
		var r, s *big.Int
		r, s, err = ecdsa.Sign(rand.Reader, k.EC, d[:])
		sig = append(pad(r.Bytes(), 32), pad(s.Bytes(), 32)...)
	default:
		err = fmt.Errorf("no key")
	}
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + b64(sig)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func pad(b []byte, n int) []byte {
	if len(b) >= n {
		return b
	}
	return append(make([]byte, n-len(b)), b...)
}
