package dashboard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/axocoatl/axocoatl-go/httpapi/dashboard"
)

// The page mounts at the root of the host that serves the API it reads.
func ExampleHandler() {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", dashboard.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	res, err := srv.Client().Get(srv.URL + "/")
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	srv.Client().CloseIdleConnections()
	fmt.Println(res.Status, res.Header.Get("Content-Type"))
	// Output: 200 OK text/html; charset=utf-8
}
