package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/httpapi"
)

// A host mounts the API's routes, from the module's own list, on its mux.
func ExampleModule_Routes() {
	ctx := context.Background()
	eng := axocoatl.New(axocoatl.Options{})
	api, _ := httpapi.New(httpapi.Config{})
	_ = eng.AddAgent(agent.Spec{ID: "assistant"}, provider.EchoModel{})
	_ = eng.Use(ctx, api)
	defer eng.Close(ctx)

	mux := http.NewServeMux()
	for _, r := range api.Routes() {
		mux.Handle(r.Method+" "+r.Pattern, api)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer api.Shutdown(ctx) // ends the event streams before srv.Close waits

	res, err := srv.Client().Post(srv.URL+"/api/agents/assistant/execute", "application/json", strings.NewReader(`{"input":"hello"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	srv.Client().CloseIdleConnections()
	fmt.Println(res.Status, strings.Contains(string(body), `"output":"hello"`))
	// Output: 200 OK true
}
