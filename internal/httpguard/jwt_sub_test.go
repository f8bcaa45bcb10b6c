package httpguard_test

import (
	"context"
	"errors"
	"testing"

	"github.com/axocoatl/axocoatl-go/internal/httpguard"
	"github.com/axocoatl/axocoatl-go/internal/httpguard/jwttest"
)

// A token without sub (or an empty one) is refused: the principal's name
// is "jwt:<sub>", which doors take for the caller (an MCP session's owner,
// the A2A caller who answers a task's question), so every sub-less token
// would be one caller and could take over another's session.
func TestVerifyJWTNeedsSubject(t *testing.T) {
	rk := jwttest.NewRSA(t, "r1")
	as := jwttest.New(t, rk)
	v, err := httpguard.NewVerifier(httpguard.OAuth{Issuer: as.URL, Audience: testAud})
	if err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(map[string]any){
		"no sub":    func(c map[string]any) { delete(c, "sub") },
		"empty sub": func(c map[string]any) { c["sub"] = "" },
	} {
		tok := jwttest.Sign(t, rk, claims(as.URL, mod), "")
		if p, err := v.Verify(context.Background(), tok); !errors.Is(err, httpguard.ErrJWTClaims) {
			t.Errorf("%s: %+v %v, want ErrJWTClaims", name, p, err)
		}
	}
}
