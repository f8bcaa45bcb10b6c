package a2aremote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// A 0.3 remote whose task lists a null artifact ("artifacts":[null, …],
// valid JSON the 0.3 types read as a nil *Artifact) gets its answer read:
// the call does not panic (which the Engine contains, but the answer is
// lost, a stack is logged and the remote task is not cancelled), and the
// other artifacts are the answer. Over message/send and message/stream.
func TestNullArtifactIsSkipped(t *testing.T) {
	const task = `{"kind":"task","id":"t1","contextId":"c1","status":{"state":"completed"},"artifacts":[null,{"artifactId":"a1","parts":[{"kind":"text","text":"the answer"}]}]}`
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			p := newPeer(t, answer)
			mux := http.NewServeMux()
			srv := p.serve(t, mux)
			mux.HandleFunc("/a2a", func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if streaming {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"1\",\"result\":%s}\n\n", task)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":"1","result":%s}`, task)
			})
			mux.HandleFunc("/.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = fmt.Fprintf(w, `{"name":"Nulls","version":"1","protocolVersion":"0.3.0","url":%q,"preferredTransport":"JSONRPC","capabilities":{"streaming":%v}}`, srv.URL+"/a2a", streaming)
			})
			s := newSetup(t, "", nil, remoteCfg(p.URL))
			s.ready(t)
			res, err := s.eng.CallTool(context.Background(), axocoatl.ToolCall{AgentID: "caller", Tool: "a2a__remote", Arguments: json.RawMessage(`{"input":"x"}`)})
			if err != nil {
				t.Fatalf("the call failed: %v", err)
			}
			if !strings.Contains(res.Content, "the answer") {
				t.Fatalf("answer %q, want the non-null artifact's text", res.Content)
			}
		})
	}
}
