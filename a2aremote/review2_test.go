package a2aremote_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// A remote that answers SendMessage with a JSON-RPC error of 200 KB cannot
// hand the model more than
// max_output_bytes of its text through the call's error: the error is cut
// like an answer, with a note, and keeps its kind (errors.Is).
func TestRemoteErrorTextBounded(t *testing.T) {
	long := strings.Repeat("é", 100<<10) // 200 KB
	p := newPeer(t, answer)
	mux := http.NewServeMux()
	srv := p.serve(t, mux)
	mux.HandleFunc("/a2a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": "1", "error": map[string]any{"code": -32001, "message": long}})
	})
	serveCard1(mux, srv.URL, "Loud", false)
	cfg := remoteCfg(p.URL)
	cfg.MaxOutputBytes = 1001
	s := newSetup(t, "", nil, cfg)
	s.ready(t)
	_, err := s.eng.CallTool(context.Background(), axocoatl.ToolCall{Tool: "a2a__remote", Arguments: json.RawMessage(`{"input":"x"}`)})
	if err == nil {
		t.Fatal("the call succeeded")
	}
	if !errors.Is(err, a2a1.ErrTaskNotFound) {
		t.Errorf("%.200s: lost its kind a2a1.ErrTaskNotFound", err)
	}
	msg := err.Error()
	if len(msg) > 1001+200 || !strings.Contains(msg, "éé") || !strings.Contains(msg, "over max_output_bytes (1001)") {
		t.Fatalf("the model would read %d bytes of the remote's error (max_output_bytes 1001): %.300s…", len(msg), msg)
	}
	if !utf8Valid(msg) {
		t.Fatalf("cut inside a character: %q", msg)
	}
}
