package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// identityExtra is the key of the caller's [axocoatl.Identity] in the
// go-sdk's TokenInfo.Extra.
const identityExtra = "axocoatl.identity"

// sdkIdentity hands the identity the Engine's guard bound to the request on
// to the go-sdk as its TokenInfo: the go-sdk then gives it to every
// handler of the request (RequestExtra.TokenInfo), and binds each session
// to the credential that opened it (a session opened by one token answers
// 403 to another: its UserID is the token's name).
var sdkIdentity = auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
	id := axocoatl.IdentityFrom(r.Context())
	scopes := make([]string, len(id.Scopes))
	for i, s := range id.Scopes {
		scopes[i] = string(s)
	}
	// The guard checked the credential on this request; the expiry is
	// this request's, which the go-sdk requires to be set.
	return &auth.TokenInfo{UserID: id.Name, Scopes: scopes, Expiration: time.Now().Add(time.Hour),
		Extra: map[string]any{identityExtra: id}}, nil
}, nil)

// serveSDK serves r with sdk, the caller's identity (if the guard found
// one) handed on as the go-sdk's TokenInfo.
func serveSDK(sdk http.Handler, w http.ResponseWriter, r *http.Request) {
	if axocoatl.IdentityFrom(r.Context()) == nil {
		sdk.ServeHTTP(w, r)
		return
	}
	// The go-sdk's middleware reads the credential from the Authorization
	// header; the guard also accepts X-API-Key, already checked.
	if !strings.HasPrefix(strings.ToLower(r.Header.Get("Authorization")), "bearer ") {
		r.Header.Set("Authorization", "Bearer checked")
	}
	sdkIdentity(sdk).ServeHTTP(w, r)
}

// requestIdentity is the identity a request of the go-sdk carries (nil:
// stdio, or a server without credentials).
func requestIdentity(req mcp.Request) *axocoatl.Identity {
	if req == nil {
		return nil
	}
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	id, _ := extra.TokenInfo.Extra[identityExtra].(*axocoatl.Identity)
	return id
}

// identityMiddleware shows a caller only the tools of the agents its
// identity sees (tools/list), and refuses a call of another's tool as a
// tool it does not know; the Engine refuses the run too (ExecuteRequest
// reads the identity callAgent puts on the run's context).
func (s *Server) identityMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		id := requestIdentity(req)
		if !id.Restricted() {
			return next(ctx, method, req)
		}
		switch method {
		case "tools/call":
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && strings.HasPrefix(p.Name, ToolPrefix) &&
				!id.SeesAgent(strings.TrimPrefix(p.Name, ToolPrefix)) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", p.Name)}
			}
		case "tools/list":
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				lr.Tools = slices.DeleteFunc(slices.Clone(lr.Tools), func(t *mcp.Tool) bool {
					return strings.HasPrefix(t.Name, ToolPrefix) && !id.SeesAgent(strings.TrimPrefix(t.Name, ToolPrefix))
				})
			}
			return res, err
		}
		return next(ctx, method, req)
	}
}
