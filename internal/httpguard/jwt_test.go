package httpguard_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/httpguard"
	"github.com/axocoatl/axocoatl-go/internal/httpguard/jwttest"
	"github.com/axocoatl/axocoatl-go/secret"
)

const testAud = "https://axocoatl.example/mcp"

func claims(iss string, mod func(map[string]any)) map[string]any {
	now := time.Now()
	c := map[string]any{"iss": iss, "aud": testAud, "sub": "alice", "exp": now.Add(time.Hour).Unix(),
		"nbf": now.Add(-time.Minute).Unix(), "scope": "read execute openid"}
	if mod != nil {
		mod(c)
	}
	return c
}

func TestVerifyJWT(t *testing.T) {
	rk, ek := jwttest.NewRSA(t, "r1"), jwttest.NewEC(t, "e1")
	other := jwttest.NewRSA(t, "r1") // same kid, another key: a forged signature
	as := jwttest.New(t, rk, ek)
	v, err := httpguard.NewVerifier(httpguard.OAuth{Issuer: as.URL, Audience: testAud})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tampered := jwttest.Sign(t, rk, claims(as.URL, nil), "")
	parts := strings.Split(tampered, ".")
	parts[1] = strings.Split(jwttest.Sign(t, rk, claims(as.URL, func(c map[string]any) { c["scope"] = "admin" }), ""), ".")[1]
	tampered = strings.Join(parts, ".")
	cases := []struct {
		name string
		tok  string
		want error // nil: valid
	}{
		{"RS256", jwttest.Sign(t, rk, claims(as.URL, nil), ""), nil},
		{"ES256", jwttest.Sign(t, ek, claims(as.URL, nil), ""), nil},
		{"aud array", jwttest.Sign(t, rk, claims(as.URL, func(c map[string]any) { c["aud"] = []string{"x", testAud} }), ""), nil},
		{"expired", jwttest.Sign(t, rk, claims(as.URL, func(c map[string]any) { c["exp"] = time.Now().Add(-2 * time.Minute).Unix() }), ""), httpguard.ErrJWTClaims},
		{"no exp", jwttest.Sign(t, rk, claims(as.URL, func(c map[string]any) { delete(c, "exp") }), ""), httpguard.ErrJWTClaims},
		{"nbf ahead", jwttest.Sign(t, rk, claims(as.URL, func(c map[string]any) { c["nbf"] = time.Now().Add(5 * time.Minute).Unix() }), ""), httpguard.ErrJWTClaims},
		{"wrong aud", jwttest.Sign(t, rk, claims(as.URL, func(c map[string]any) { c["aud"] = "https://other.example" }), ""), httpguard.ErrJWTClaims},
		{"wrong iss", jwttest.Sign(t, rk, claims("https://evil.example", nil), ""), httpguard.ErrJWTClaims},
		{"bad signature", jwttest.Sign(t, other, claims(as.URL, nil), ""), httpguard.ErrJWTSignature},
		{"tampered claims", tampered, httpguard.ErrJWTSignature},
		{"alg none", jwttest.Sign(t, rk, claims(as.URL, nil), "none"), httpguard.ErrJWTAlg},
		{"alg HS256", jwttest.Sign(t, rk, claims(as.URL, nil), "HS256"), httpguard.ErrJWTAlg},
		{"RSA key as ES256", jwttest.Sign(t, rk, claims(as.URL, nil), "ES256"), httpguard.ErrJWTSignature},
		{"unknown kid", jwttest.Sign(t, jwttest.NewRSA(t, "r9"), claims(as.URL, nil), ""), httpguard.ErrJWTKid},
		{"garbage", "a.b.c", httpguard.ErrJWTMalformed},
	}
	for _, c := range cases {
		p, err := v.Verify(ctx, c.tok)
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want == nil && (p.Name != "jwt:alice" || fmt.Sprint(p.Scopes) != "[read execute]"):
			t.Errorf("%s: principal %+v, want jwt:alice with [read execute]", c.name, p)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
	}
}

// alg "none" with an empty signature is refused whatever the header says,
// and so is a signature-less token claiming RS256.
func TestVerifyJWTNoSignature(t *testing.T) {
	rk := jwttest.NewRSA(t, "r1")
	as := jwttest.New(t, rk)
	v, _ := httpguard.NewVerifier(httpguard.OAuth{Issuer: as.URL, Audience: testAud})
	tok := jwttest.Sign(t, rk, claims(as.URL, nil), "")
	stripped := tok[:strings.LastIndexByte(tok, '.')+1]
	if _, err := v.Verify(context.Background(), stripped); err == nil {
		t.Fatal("a token without signature was accepted")
	}
}

// A rotated key set is picked up: a token of the new key (a kid the cached
// set lacks) fetches the set again; the old key's tokens are refused once
// the set without it is fetched.
func TestJWKSRotation(t *testing.T) {
	k1, k2 := jwttest.NewRSA(t, "k1"), jwttest.NewRSA(t, "k2")
	as := jwttest.New(t, k1)
	v, _ := httpguard.NewVerifier(httpguard.OAuth{Issuer: as.URL, Audience: testAud, MinRefresh: time.Nanosecond})
	ctx := context.Background()
	if _, err := v.Verify(ctx, jwttest.Sign(t, k1, claims(as.URL, nil), "")); err != nil {
		t.Fatal(err)
	}
	as.SetKeys(k2)
	if _, err := v.Verify(ctx, jwttest.Sign(t, k2, claims(as.URL, nil), "")); err != nil {
		t.Fatalf("the rotated key was not picked up: %v", err)
	}
	if _, err := v.Verify(ctx, jwttest.Sign(t, k1, claims(as.URL, nil), "")); !errors.Is(err, httpguard.ErrJWTKid) {
		t.Fatalf("a key no longer in the set: %v, want ErrJWTKid", err)
	}
}

// Guards: JWKS fetches (at most one per jwks_min_refresh)
//
// Tokens naming kids the set lacks fetch the set at most once per
// MinRefresh, however many arrive: they cannot make the server hammer the
// issuer.
func TestUnknownKidsFetchOncePerMinRefresh(t *testing.T) {
	k1 := jwttest.NewRSA(t, "k1")
	as := jwttest.New(t, k1)
	v, _ := httpguard.NewVerifier(httpguard.OAuth{Issuer: as.URL, Audience: testAud, MinRefresh: time.Hour})
	ctx := context.Background()
	for i := range 50 {
		tok := jwttest.Sign(t, jwttest.Key{Kid: fmt.Sprintf("x%d", i), RSA: k1.RSA}, claims(as.URL, nil), "")
		if _, err := v.Verify(ctx, tok); !errors.Is(err, httpguard.ErrJWTKid) {
			t.Fatalf("unknown kid: %v", err)
		}
	}
	if n := as.Hits.Load(); n != 1 {
		t.Fatalf("%d JWKS fetches for 50 unknown kids, want 1", n)
	}
}

// Guards: max_jwks_bytes
//
// A key set over the bound is refused (ErrJWKS), not read to its end.
func TestJWKSBodyBound(t *testing.T) {
	k1 := jwttest.NewRSA(t, "k1")
	as := jwttest.New(t, k1)
	as.Extra = []byte(`,"padding":"` + strings.Repeat("x", 4096) + `"`)
	v, _ := httpguard.NewVerifier(httpguard.OAuth{Issuer: as.URL, Audience: testAud, MaxJWKSBody: 2048})
	_, err := v.Verify(context.Background(), jwttest.Sign(t, k1, claims(as.URL, nil), ""))
	if !errors.Is(err, httpguard.ErrJWKS) || !strings.Contains(err.Error(), "over 2048 bytes") {
		t.Fatalf("oversized key set: %v", err)
	}
}

// Guards: jwks_timeout
//
// A key set server that never answers costs a request at most the timeout.
func TestJWKSTimeout(t *testing.T) {
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(block)
	k1 := jwttest.NewRSA(t, "k1")
	v, _ := httpguard.NewVerifier(httpguard.OAuth{Issuer: "https://as.example", Audience: testAud, JWKSURL: slow.URL, Timeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := v.Verify(context.Background(), jwttest.Sign(t, k1, claims("https://as.example", nil), ""))
	if !errors.Is(err, httpguard.ErrJWKS) {
		t.Fatalf("slow key set: %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("took %s", d)
	}
}

// Guards: jwt size (16 KiB)
func TestJWTSizeBound(t *testing.T) {
	v, _ := httpguard.NewVerifier(httpguard.OAuth{Issuer: "https://as.example", Audience: testAud, JWKSURL: "https://as.example/jwks"})
	_, err := v.Verify(context.Background(), strings.Repeat("a", httpguard.MaxJWTBytes)+".b.c")
	if !errors.Is(err, httpguard.ErrJWTMalformed) {
		t.Fatalf("oversized JWT: %v", err)
	}
}

// Through the guard: a refused JWT answers 401 with a Bearer challenge
// naming the resource metadata and invalid_token; a valid one without the
// route's scope 403 insufficient_scope; a valid one passes.
// executeRoute wraps a route asking for the execute scope with g, and
// returns a func sending it a GET with a bearer token ("": none).
func executeRoute(g *httpguard.Guard) func(tok string) *httptest.ResponseRecorder {
	h := g.Wrap(httpguard.Route{Scope: "execute"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	return func(tok string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "https://axocoatl.example/mcp", nil)
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
}

func TestGuardJWTChallenge(t *testing.T) {
	k1 := jwttest.NewRSA(t, "k1")
	as := jwttest.New(t, k1)
	g, err := httpguard.New(httpguard.Options{PublicURL: "https://axocoatl.example", OAuth: &httpguard.OAuth{Issuer: as.URL, Audience: testAud},
		Credentials: []httpguard.Credential{{Name: "ops", Token: secret.Secret("ops-token-0123456789abcdef"), Scopes: []string{"read"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.StopIdle()
	do := executeRoute(g)
	if w := do(""); w.Code != 401 || !strings.Contains(w.Header().Get("WWW-Authenticate"), `resource_metadata="https://axocoatl.example/.well-known/oauth-protected-resource/mcp"`) {
		t.Errorf("no token: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	expired := jwttest.Sign(t, k1, claims(as.URL, func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), "")
	if w := do(expired); w.Code != 401 || !strings.Contains(w.Header().Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("expired: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	readOnly := jwttest.Sign(t, k1, claims(as.URL, func(c map[string]any) { c["scope"] = "read" }), "")
	if w := do(readOnly); w.Code != 403 || !strings.Contains(w.Header().Get("WWW-Authenticate"), `error="insufficient_scope", scope="execute"`) {
		t.Errorf("read-only JWT on an execute route: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	if w := do("ops-token-0123456789abcdef"); w.Code != 403 {
		t.Errorf("read-only static token on an execute route: %d", w.Code)
	}
	if w := do(jwttest.Sign(t, k1, claims(as.URL, nil), "")); w.Code != 200 {
		t.Errorf("valid: %d %s", w.Code, w.Body)
	}
}

// An outage of the issuer's key set is not the clients' failure: a token
// whose key is not cached is answered 503 with Retry-After, and however
// many such requests a client makes it is not locked out (max auth
// failures): once the set is back its token is accepted. Wrong tokens
// still count.
func TestJWKSOutageIsNotAClientFailure(t *testing.T) {
	k1 := jwttest.NewRSA(t, "k1")
	as := jwttest.New(t, k1)
	as.Down.Store(true)
	g, err := httpguard.New(httpguard.Options{PublicURL: "https://axocoatl.example", Failures: httpguard.FailureLimit{Max: 3},
		OAuth: &httpguard.OAuth{Issuer: as.URL, Audience: testAud, MinRefresh: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.StopIdle()
	do := executeRoute(g)
	good := jwttest.Sign(t, k1, claims(as.URL, nil), "")
	for i := range 10 {
		w := do(good)
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Fatalf("request %d during the outage: %d (Retry-After %q) %s, want 503 with Retry-After", i, w.Code, w.Header().Get("Retry-After"), w.Body)
		}
		if strings.Contains(w.Body.String(), as.URL) {
			t.Fatalf("the answer names the issuer's address: %s", w.Body)
		}
		if i%3 == 0 {
			time.Sleep(25 * time.Millisecond) // past MinRefresh: the next request fetches (and fails) again
		}
	}
	as.Down.Store(false)
	time.Sleep(25 * time.Millisecond)
	if w := do(good); w.Code != http.StatusOK {
		t.Fatalf("after the outage: %d %s, want 200 (the client was locked out by our outage?)", w.Code, w.Body)
	}
	for range 3 {
		do("not-a-token-0123456789")
	}
	if w := do(good); w.Code != http.StatusTooManyRequests {
		t.Fatalf("after 3 wrong tokens: %d, want 429: wrong tokens must still count", w.Code)
	}
}

// BenchmarkVerifyJWTCachedToken is the check of an access token the
// Verifier has seen (a client sends the same one until it expires): a
// SHA-256 of the token, a map look-up and exp/nbf (issue #29: at most 20 µs).
// BenchmarkVerifyJWTCachedKey measures a token seen for the first time.
func BenchmarkVerifyJWTCachedToken(b *testing.B) {
	for _, kind := range []string{"RS256", "ES256"} {
		b.Run(kind, func(b *testing.B) {
			k := jwttest.NewRSA(b, "k1")
			if kind == "ES256" {
				k = jwttest.NewEC(b, "k1")
			}
			as := jwttest.New(b, k)
			v, _ := httpguard.NewVerifier(httpguard.OAuth{Issuer: as.URL, Audience: testAud})
			tok := jwttest.Sign(b, k, claims(as.URL, nil), "")
			ctx := context.Background()
			if _, err := v.Verify(ctx, tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGuardAuthorize is the guard's whole check of one request (Host,
// credential, scope, Origin) with a scoped static token and with a JWT
// seen before, against a route asking for read.
func BenchmarkGuardAuthorize(b *testing.B) {
	k := jwttest.NewRSA(b, "k1")
	as := jwttest.New(b, k)
	g, err := httpguard.New(httpguard.Options{OAuth: &httpguard.OAuth{Issuer: as.URL, Audience: testAud},
		Credentials: []httpguard.Credential{{Name: "ops", Token: secret.Secret("ops-token-0123456789abcdef"), Scopes: []string{"read"}}}})
	if err != nil {
		b.Fatal(err)
	}
	defer g.StopIdle()
	for name, tok := range map[string]string{"static": "ops-token-0123456789abcdef", "jwt": jwttest.Sign(b, k, claims(as.URL, nil), "")} {
		b.Run(name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/api/agents", nil)
			r.Header.Set("Authorization", "Bearer "+tok)
			w := httptest.NewRecorder()
			if _, ok := g.Authorize(w, r, "read"); !ok {
				b.Fatalf("refused: %d %s", w.Code, w.Body)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, ok := g.Authorize(w, r, "read"); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}
