package config_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/config"
)

// Every HTTP door is declared once, by its module: each route of each
// module's list is in Runtime.Routes with that module's handler, and the
// router the daemon serves (Runtime.Handler, built by Mount) routes a
// request for it to the module. With a token set, a token route answers
// the module guard's 401 and a public one 2xx; the router's own 404 or 405
// would mean the route never reached it. A Runtime field that is an HTTP
// module but is left out of HTTPModules fails too.
func TestRoutesReachTheRouter(t *testing.T) {
	ctx := context.Background()
	cfg, err := config.ParseWith(ctx, "routes.yaml", []byte(`
server:
  api_token: routes-test-token-0123456789
  max_auth_failures: -1
agents:
  - id: assistant
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.DataDir = t.TempDir() // conversations.db
	rt, err := cfg.Build(ctx, config.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)

	composed := map[axocoatl.HTTPModule]bool{}
	for _, m := range rt.HTTPModules() {
		composed[m] = true
	}
	v := reflect.ValueOf(rt).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() || f.Kind() != reflect.Pointer || f.IsNil() {
			continue
		}
		if m, ok := f.Interface().(axocoatl.HTTPModule); ok && !composed[m] {
			t.Errorf("Runtime.%s serves HTTP but is not in HTTPModules: its routes reach no host", v.Type().Field(i).Name)
		}
	}

	listed := map[string]http.Handler{}
	for _, r := range rt.Routes() {
		listed[r.Method+" "+r.Pattern] = r.Handler
	}
	h, err := rt.Handler()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range rt.HTTPModules() {
		for _, r := range m.Routes() {
			n++
			key := r.Method + " " + r.Pattern
			if listed[key] != http.Handler(m) {
				t.Errorf("%s of %s is not in Runtime.Routes with its module's handler", key, m.Name())
				continue
			}
			path := strings.NewReplacer("{$}", "", "{id}", "assistant", "{task}", "t1", "{config}", "c1", "{name}", "w1").Replace(r.Pattern)
			req := httptest.NewRequest(r.Method, path, nil)
			req.Host = "127.0.0.1:8080"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			public := r.Scope == axocoatl.ScopePublic
			if public && w.Code/100 != 2 || !public && w.Code != http.StatusUnauthorized {
				t.Errorf("%s (%s, public %v) through the router: %d %s", key, m.Name(), public, w.Code, w.Body)
			}
		}
	}
	if n < 40 {
		t.Fatalf("only %d routes declared", n)
	}
	// The router's own answers, for contrast.
	for _, tc := range []struct {
		method, path string
		status       int
	}{{"GET", "/no/such/route", 404}, {"PUT", "/api/agents", 405}, {"GET", "/favicon.ico", 404}} {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(tc.method, tc.path, nil)
		req.Host = "127.0.0.1:8080"
		h.ServeHTTP(w, req)
		if w.Code != tc.status || !strings.Contains(w.Body.String(), `"error":{"code":`) {
			t.Errorf("%s %s: %d %s, want %d in the error shape", tc.method, tc.path, w.Code, w.Body, tc.status)
		}
	}
}
