package httpguard

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/httpguard/jwttest"
)

// A remembered token still expires: the cache keeps exp and checks it on
// every hit.
func TestVerifiedTokenExpires(t *testing.T) {
	k := jwttest.NewRSA(t, "k1")
	as := jwttest.New(t, k)
	v, err := NewVerifier(OAuth{Issuer: as.URL, Audience: "aud", ClockSkew: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	v.now = func() time.Time { return now }
	tok := jwttest.Sign(t, k, map[string]any{"iss": as.URL, "aud": "aud", "sub": "s", "exp": now.Add(time.Minute).Unix()}, "")
	for range 2 { // the second is a cache hit
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
	}
	if len(v.verified) != 1 {
		t.Fatalf("%d tokens remembered, want 1", len(v.verified))
	}
	now = now.Add(2 * time.Minute)
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrJWTClaims) {
		t.Fatalf("an expired remembered token: %v", err)
	}
}

// Guards: verified access tokens remembered (MaxVerifiedTokens)
//
// The cache of verified tokens holds at most its bound, however many
// distinct valid tokens arrive.
func TestVerifiedTokensBounded(t *testing.T) {
	k := jwttest.NewEC(t, "k1")
	as := jwttest.New(t, k)
	v, _ := NewVerifier(OAuth{Issuer: as.URL, Audience: "aud"})
	if v.maxVerified != MaxVerifiedTokens || MaxVerifiedTokens != 10000 {
		t.Fatalf("bound %d / %d, docs say 10000", v.maxVerified, MaxVerifiedTokens)
	}
	v.maxVerified = 5
	for i := range 20 {
		tok := jwttest.Sign(t, k, map[string]any{"iss": as.URL, "aud": "aud", "sub": fmt.Sprint(i), "exp": time.Now().Add(time.Hour).Unix()}, "")
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
		if n := len(v.verified); n > 5 {
			t.Fatalf("%d tokens remembered, bound 5", n)
		}
	}
}

// BenchmarkVerifyJWTCachedKey is the full check of a token not seen before,
// its key cached: parse, signature (RSA-2048 or P-256), claims.
func BenchmarkVerifyJWTCachedKey(b *testing.B) {
	for _, kind := range []string{"RS256", "ES256"} {
		b.Run(kind, func(b *testing.B) {
			k := jwttest.NewRSA(b, "k1")
			if kind == "ES256" {
				k = jwttest.NewEC(b, "k1")
			}
			as := jwttest.New(b, k)
			v, _ := NewVerifier(OAuth{Issuer: as.URL, Audience: "aud"})
			tok := jwttest.Sign(b, k, map[string]any{"iss": as.URL, "aud": "aud", "sub": "s", "scope": "read execute",
				"exp": time.Now().Add(time.Hour).Unix()}, "")
			ctx := context.Background()
			if _, err := v.Verify(ctx, tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, _, err := v.verify(ctx, tok); err != nil { // the uncached path
					b.Fatal(err)
				}
			}
		})
	}
}
