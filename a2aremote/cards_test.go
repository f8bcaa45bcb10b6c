package a2aremote_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/a2aremote"
)

// What Check reports of a card is printed by doctor on the operator's
// terminal: a hostile card's escape sequences (in its name, in an
// interface it lists) are removed, as from the tool description.
func TestCheckCleansCardText(t *testing.T) {
	var url string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"name":"Evil\u001b]0;pwned\u0007\u001b[2J","version":"1","supportedInterfaces":[
			{"url":%q,"protocolBinding":"JSONRPC","protocolVersion":"1.0"},
			{"url":%q,"protocolBinding":"GRPC\u001b[31m","protocolVersion":"1.0\u202e"}]}`, url+"/a2a", url+"/grpc")
	}))
	defer srv.Close()
	url = srv.URL
	info, err := a2aremote.Check(context.Background(), remoteCfg(srv.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	all := info.Name + strings.Join(info.Interfaces, "|")
	if strings.ContainsAny(all, "\x1b\x07\u202e") || info.Name != "Evil]0;pwned[2J" || len(info.Interfaces) != 2 {
		t.Fatalf("Check = %+v: hidden or control characters left", info)
	}
}
