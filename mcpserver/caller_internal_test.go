package mcpserver

import (
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// A requestState is bound to the caller the guard found, not to the
// Authorization header alone: serveSDK gives every X-API-Key caller the
// same placeholder header, so two tokens sent that way were one caller
// and one could resume (answer the questions of) the other's call.
func TestCallerDigestIsTheIdentity(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	req := func(auth, name string) *mcp.CallToolRequest {
		h := http.Header{}
		h.Set("Authorization", auth)
		extra := &mcp.RequestExtra{Header: h}
		if name != "" {
			id := &axocoatl.Identity{Name: name, Scopes: []axocoatl.Scope{axocoatl.ScopeExecute}}
			extra.TokenInfo = tokenInfo(id)
		}
		return &mcp.CallToolRequest{Extra: extra}
	}
	if a, b := callerDigest(key, req("Bearer checked", "alice")), callerDigest(key, req("Bearer checked", "mallory")); a == b {
		t.Errorf("two X-API-Key callers (alice, mallory) have one digest %s", a)
	}
	if a, b := callerDigest(key, req("Bearer t1", "jwt:alice")), callerDigest(key, req("Bearer t2", "jwt:alice")); a != b {
		t.Errorf("one subject's refreshed token is another caller: %s vs %s", a, b)
	}
	if a, b := callerDigest(key, req("Bearer alice", "")), callerDigest(key, req("Bearer mallory", "")); a == b || a == "" {
		t.Errorf("without an identity the header tells callers apart: %q %q", a, b)
	}
}

func tokenInfo(id *axocoatl.Identity) *auth.TokenInfo {
	return &auth.TokenInfo{UserID: id.Name, Extra: map[string]any{identityExtra: id}}
}
