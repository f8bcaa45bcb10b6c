package mount

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestBaseURLFollowsPrefix(t *testing.T) {
	var got string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = BaseURL("", r) })
	mux := http.NewServeMux()
	mux.Handle("/ai/", http.StripPrefix("/ai", h))
	mux.Handle("/card", h)
	for path, want := range map[string]string{"/ai/.well-known/agent-card.json": "http://host.example/ai", "/card": "http://host.example"} {
		r := httptest.NewRequest(http.MethodGet, "http://host.example"+path+"?q=1", nil)
		r.RequestURI = path + "?q=1"
		mux.ServeHTTP(httptest.NewRecorder(), r)
		if got != want {
			t.Errorf("%s: base %q, want %q", path, got, want)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/ai/a2a", nil)
	r.RequestURI = "/ai/a2a"
	http.StripPrefix("/ai", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = BaseURL("https://public.example/base/", r)
	})).ServeHTTP(httptest.NewRecorder(), r)
	if got != "https://public.example/base/ai" {
		t.Errorf("with a public URL: %q", got)
	}
}
