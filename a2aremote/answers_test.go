package a2aremote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"testing"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// replier answers every message with one Message that names the task of
// its execution context (a2a1.NewMessageForTask, as many executors do) and
// creates no task: the reference server returns that Message as the whole
// answer, final in a stream as in a blocking reply.
type replier struct{}

func (replier) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) {
		yield(a2a1.NewMessageForTask(a2a1.MessageRoleAgent, ec, a2a1.NewTextPart("direct reply to: "+ec.Message.Parts[0].Text())), nil)
	}
}

func (replier) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) {
		yield(a2a1.NewStatusUpdateEvent(ec, a2a1.TaskStateCanceled, nil), nil)
	}
}

// executorAnswer serves exec as the remote agent name and returns the
// output of a run of the caller agent whose tool call sends input to it.
func executorAnswer(t *testing.T, exec a2asrv.AgentExecutor, name string, streaming bool, input string) string {
	t.Helper()
	p := serveExecutor(t, exec, name, streaming)
	s := newSetup(t, input, nil, remoteCfg(p.URL))
	s.ready(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := s.eng.Execute(ctx, "caller", "go")
	if err != nil {
		t.Fatal(err)
	}
	return res.Output
}

// A reply Message that carries a taskId is still the whole answer (a2a.proto:
// a Message ends the exchange); the client must not go looking for a task
// the remote never created.
func TestMessageReplyWithTaskIDIsTheAnswer(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		name := map[bool]string{true: "stream", false: "send"}[streaming]
		t.Run(name, func(t *testing.T) {
			if got, want := executorAnswer(t, replier{}, "Replier", streaming, "hello"), "tool said: direct reply to: hello"; got != want {
				t.Fatalf("output = %q, want %q", got, want)
			}
		})
	}
}

// interleaver streams two artifacts in interleaved chunks, as a remote
// that produces a report and its summary side by side does: A, B, then
// more of A and B (append).
type interleaver struct{}

func (interleaver) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) {
		if !yield(a2a1.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		a := a2a1.NewArtifactEvent(ec, a2a1.NewTextPart("A1"))
		b := a2a1.NewArtifactEvent(ec, a2a1.NewTextPart("B1"))
		for _, ev := range []a2a1.Event{a, b,
			a2a1.NewArtifactUpdateEvent(ec, a.Artifact.ID, a2a1.NewTextPart("A2")),
			a2a1.NewArtifactUpdateEvent(ec, b.Artifact.ID, a2a1.NewTextPart("B2")),
			a2a1.NewStatusUpdateEvent(ec, a2a1.TaskStateCompleted, nil)} {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func (interleaver) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) {
		yield(a2a1.NewStatusUpdateEvent(ec, a2a1.TaskStateCanceled, nil), nil)
	}
}

// Interleaved artifact chunks are joined per artifact (and do not crash
// the process: the per-artifact text builders must survive the slice
// that holds them growing).
func TestInterleavedArtifacts(t *testing.T) {
	if got, want := executorAnswer(t, interleaver{}, "Writer", true, "write"), "tool said: A1A2\nB1B2"; got != want {
		t.Fatalf("output = %q, want %q", got, want)
	}
}

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
