package a2aremote_test

import (
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"context"
	"github.com/axocoatl/axocoatl-go/a2aremote"
	"iter"
	"net/http"
	"testing"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
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

// A reply Message that carries a taskId is still the whole answer (a2a.proto:
// a Message ends the exchange); the client must not go looking for a task
// the remote never created.
func TestMessageReplyWithTaskIDIsTheAnswer(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		name := map[bool]string{true: "stream", false: "send"}[streaming]
		t.Run(name, func(t *testing.T) {
			p := serveExecutor(t, replier{}, "Replier", streaming)
			s := newSetup(t, "hello", nil, remoteCfg(p.URL))
			s.ready(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := s.eng.Execute(ctx, "caller", "go")
			if err != nil {
				t.Fatal(err)
			}
			if want := "tool said: direct reply to: hello"; res.Output != want {
				t.Fatalf("output = %q, want %q", res.Output, want)
			}
		})
	}
}

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

// The tool name a2a__<name> must stay within the 64 characters model APIs
// accept for a tool name (the limit mcpclient.MaxToolNameLen keeps): a
// longer one makes every request of an agent allowed that tool fail at the
// provider, so the name is refused when the config is read.
func TestNameKeepsToolNameWithin64(t *testing.T) {
	ok := a2aremote.AgentConfig{Name: strings.Repeat("a", 59), URL: "https://planner.example.com"}
	if err := ok.Validate(); err != nil || len(ok.ToolName()) != 64 {
		t.Fatalf("59-character name: %v (tool name %d characters)", err, len(ok.ToolName()))
	}
	long := a2aremote.AgentConfig{Name: strings.Repeat("a", 60), URL: "https://planner.example.com"}
	err := long.Validate()
	if err == nil || !errors.Is(err, a2aremote.ErrInvalidConfig) || !strings.Contains(err.Error(), "at most 59 characters") {
		t.Fatalf("60-character name: %v, want a config error saying at most 59 characters", err)
	}
}

// Stop leaves no connection open to a remote: idle keep-alive connections
// (two goroutines each in net/http) belong to the module and are closed
// with it, not left in a transport shared with the rest of the process
// until its idle timeout.
func TestStopClosesIdleConnections(t *testing.T) {
	p := newPeer(t, answer)
	mux := http.NewServeMux()
	var open atomic.Int64
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	defer srv.Close()
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(v1Executor{p})))
	serveCard1(mux, srv.URL, "Planner", true)
	s := newSetup(t, "hello", nil, remoteCfg(srv.URL))
	s.ready(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.eng.Execute(ctx, "caller", "go"); err != nil {
		t.Fatal(err)
	}
	if open.Load() == 0 {
		t.Fatal("no connection to the remote after a call: the test cannot tell")
	}
	if err := s.mod.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for open.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := open.Load(); n > 0 {
		t.Fatalf("%d connections to the remote still open after Stop", n)
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
	p := serveExecutor(t, interleaver{}, "Writer", true)
	s := newSetup(t, "write", nil, remoteCfg(p.URL))
	s.ready(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := s.eng.Execute(ctx, "caller", "go")
	if err != nil {
		t.Fatal(err)
	}
	if want := "tool said: A1A2\nB1B2"; res.Output != want {
		t.Fatalf("output = %q, want %q", res.Output, want)
	}
}
