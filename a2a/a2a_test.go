package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"go.uber.org/goleak"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/lattice"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// prefixModel answers "<prefix>: <last user message>", so a test can tell
// which agent ran.
type prefixModel struct{ prefix string }

func (m prefixModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &agent.Response{Content: m.prefix + ": " + req.Messages[len(req.Messages)-1].Content}, nil
}

// slowModel answers only when its context ends, i.e. it runs until the task
// is canceled or times out. started receives once per call.
type slowModel struct{ started chan string }

func (m slowModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	select {
	case m.started <- req.Messages[len(req.Messages)-1].Content:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// failingModel always fails, as a provider that is down.
type failingModel struct{}

func (failingModel) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return nil, errors.New("model exploded")
}

type fixture struct {
	eng     *axocoatl.Engine
	h       *a2a.Handler
	srv     *httptest.Server
	client  *http.Client
	started chan string
}

// newFixture serves agents assistant (echo), upper (prefix "upper"), slow and
// broken on an httptest server that mounts the handler on its own mux.
func newFixture(t testing.TB, cfg a2a.Config, guard ...axocoatl.HTTPOptions) *fixture {
	t.Helper()
	var opts axocoatl.Options
	if len(guard) > 0 {
		opts.HTTP = guard[0]
	}
	f := &fixture{eng: axocoatl.New(opts), started: make(chan string, 16)}
	must(t, f.eng.AddAgent(agent.Spec{ID: "assistant", Name: "Assistant", Description: "Echoes."}, provider.EchoModel{}))
	must(t, f.eng.AddAgent(agent.Spec{ID: "upper", Name: "Upper"}, prefixModel{"upper"}))
	must(t, f.eng.AddAgent(agent.Spec{ID: "slow", Timeout: 30 * time.Second}, slowModel{f.started}))
	must(t, f.eng.AddAgent(agent.Spec{ID: "broken"}, failingModel{}))
	h, err := a2a.New(cfg)
	must(t, err)
	must(t, f.eng.Use(context.Background(), h))
	f.h = h
	f.srv = httptest.NewServer(h)
	f.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	t.Cleanup(func() {
		f.client.CloseIdleConnections()
		f.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("handler close: %v", err)
		}
		if err := f.eng.Close(ctx); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	return f
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// a2aClient resolves the card at base with a2a-go's default resolver and
// connects with its JSON-RPC transport, as any a2a-go user would.
func (f *fixture) a2aClient(t testing.TB, base string, cfg *a2aclient.Config) (*a2aclient.Client, *a2a03.AgentCard) {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.DefaultResolver.Resolve(ctx, base)
	if err != nil {
		t.Fatalf("resolve card at %s: %v", base, err)
	}
	opts := []a2aclient.FactoryOption{a2aclient.WithJSONRPCTransport(f.client)}
	if cfg != nil {
		opts = append(opts, a2aclient.WithConfig(*cfg))
	}
	c, err := a2aclient.NewFromCard(ctx, card, opts...)
	if err != nil {
		t.Fatalf("new client from card: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c, card
}

func userMessage(text string, meta map[string]any) *a2a03.MessageSendParams {
	m := a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: text})
	m.Metadata = meta
	return &a2a03.MessageSendParams{Message: m}
}

func outputOf(t testing.TB, task *a2a03.Task) string {
	t.Helper()
	if len(task.Artifacts) != 1 || len(task.Artifacts[0].Parts) != 1 {
		t.Fatalf("task %s: want one artifact with one part, got %+v", task.ID, task.Artifacts)
	}
	p, ok := task.Artifacts[0].Parts[0].(a2a03.TextPart)
	if !ok {
		t.Fatalf("artifact part is %T, want TextPart", task.Artifacts[0].Parts[0])
	}
	return p.Text
}

func sendTask(t testing.TB, c *a2aclient.Client, params *a2a03.MessageSendParams) *a2a03.Task {
	t.Helper()
	res, err := c.SendMessage(context.Background(), params)
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a03.Task)
	if !ok {
		t.Fatalf("SendMessage result is %T, want *a2a.Task", res)
	}
	return task
}

func TestA2AGoClientCardAndSend(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	sub, err := f.eng.Bus().Subscribe(lattice.Filter{}, 64)
	must(t, err)
	defer sub.Close()

	c, card := f.a2aClient(t, f.srv.URL, nil)
	if card.ProtocolVersion != "0.3.0" || card.URL != f.srv.URL+"/a2a" ||
		card.PreferredTransport != a2a03.TransportProtocolJSONRPC || !card.Capabilities.Streaming {
		t.Fatalf("card: %+v", card)
	}
	if len(card.Skills) != 4 || card.Skills[0].ID != "assistant" || card.Skills[1].ID != "upper" {
		t.Fatalf("skills: %+v", card.Skills)
	}
	if card.SecuritySchemes != nil {
		t.Fatalf("no token configured, yet security schemes: %v", card.SecuritySchemes)
	}

	// Default agent: the first one, the echo.
	task := sendTask(t, c, userMessage("hello there", nil))
	if task.Status.State != a2a03.TaskStateCompleted || outputOf(t, task) != "hello there" {
		t.Fatalf("default agent: %+v", task)
	}
	if task.ContextID == "" || len(task.History) != 1 || task.History[0].TaskID != task.ID {
		t.Fatalf("task ids/history: %+v", task)
	}

	// Named agent through message.metadata.receiver_id.
	named := sendTask(t, c, userMessage("hi", map[string]any{"receiver_id": "upper"}))
	if got := outputOf(t, named); got != "upper: hi" {
		t.Fatalf("named agent output %q", got)
	}

	// A failing agent gives a failed task that says why.
	failed := sendTask(t, c, userMessage("x", map[string]any{"receiver_id": "broken"}))
	if failed.Status.State != a2a03.TaskStateFailed || len(failed.Artifacts) != 0 || failed.Status.Message == nil ||
		!strings.Contains(failed.Status.Message.Parts[0].(a2a03.TextPart).Text, "model exploded") {
		t.Fatalf("failed task: %+v", failed)
	}

	// GetTask after completion.
	got, err := c.GetTask(context.Background(), &a2a03.TaskQueryParams{ID: named.ID})
	must(t, err)
	if got.ID != named.ID || got.Status.State != a2a03.TaskStateCompleted || outputOf(t, got) != "upper: hi" {
		t.Fatalf("GetTask: %+v", got)
	}
	zero := 0
	got, err = c.GetTask(context.Background(), &a2a03.TaskQueryParams{ID: named.ID, HistoryLength: &zero})
	must(t, err)
	if len(got.History) != 0 {
		t.Fatalf("historyLength 0 still gave history %+v", got.History)
	}

	// Unknown task.
	_, err = c.GetTask(context.Background(), &a2a03.TaskQueryParams{ID: "no-such-task"})
	if !errors.Is(err, a2a03.ErrTaskNotFound) {
		t.Fatalf("GetTask unknown: %v, want ErrTaskNotFound", err)
	}
	_, err = c.CancelTask(context.Background(), &a2a03.TaskIDParams{ID: "no-such-task"})
	if !errors.Is(err, a2a03.ErrTaskNotFound) {
		t.Fatalf("CancelTask unknown: %v, want ErrTaskNotFound", err)
	}
	// A finished task cannot be canceled.
	_, err = c.CancelTask(context.Background(), &a2a03.TaskIDParams{ID: named.ID})
	if !errors.Is(err, a2a03.ErrTaskNotCancelable) {
		t.Fatalf("CancelTask completed: %v, want ErrTaskNotCancelable", err)
	}

	// The lattice saw the named task like any door's, with the A2A task id.
	want := map[string]bool{axocoatl.EventAgentActivated: false, axocoatl.EventTaskCompleted: false}
	deadline := time.After(5 * time.Second)
	for !want[axocoatl.EventAgentActivated] || !want[axocoatl.EventTaskCompleted] {
		select {
		case ev := <-sub.Events():
			var p struct {
				TaskID string `json:"task_id"`
				Source string `json:"source"`
			}
			must(t, json.Unmarshal(ev.Payload, &p))
			if p.TaskID == string(named.ID) {
				if p.Source != "a2a" {
					t.Fatalf("%s source %q, want a2a", ev.Type, p.Source)
				}
				want[ev.Type] = true
			}
		case <-deadline:
			t.Fatalf("lattice events for task %s: %v", named.ID, want)
		}
	}
}

func TestA2AGoClientPerAgentEndpoint(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	c, card := f.a2aClient(t, f.srv.URL+"/a2a/agents/upper", nil)
	if card.URL != f.srv.URL+"/a2a/agents/upper" || card.Name != "Upper" || len(card.Skills) != 1 || card.Skills[0].ID != "upper" {
		t.Fatalf("per-agent card: %+v", card)
	}
	task := sendTask(t, c, userMessage("x", nil))
	if got := outputOf(t, task); got != "upper: x" {
		t.Fatalf("per-agent endpoint ran %q", got)
	}
	// receiver_id still wins over the URL.
	task = sendTask(t, c, userMessage("y", map[string]any{"receiver_id": "assistant"}))
	if got := outputOf(t, task); got != "y" {
		t.Fatalf("receiver_id over per-agent URL ran %q", got)
	}
	// A task of another agent is not visible through this endpoint.
	_, err := c.GetTask(context.Background(), &a2a03.TaskQueryParams{ID: task.ID})
	if !errors.Is(err, a2a03.ErrTaskNotFound) {
		t.Fatalf("cross-agent GetTask: %v", err)
	}
	resp, err := f.client.Get(f.srv.URL + "/a2a/agents/nobody/.well-known/agent-card.json")
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("card of unknown agent: %d", resp.StatusCode)
	}
}

func TestA2AGoClientStreaming(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	c, _ := f.a2aClient(t, f.srv.URL, nil)
	long := strings.Repeat("é\"\n<", 20_000) // 120 KB, escapes grow it: must arrive in chunks under 64 KiB lines
	var events []a2a03.Event
	for ev, err := range c.SendStreamingMessage(context.Background(), userMessage(long, nil)) {
		must(t, err)
		events = append(events, ev)
	}
	if len(events) < 4 {
		t.Fatalf("want task, working, artifact(s), final; got %d events", len(events))
	}
	first, ok := events[0].(*a2a03.Task)
	if !ok || first.Status.State != a2a03.TaskStateSubmitted {
		t.Fatalf("first event: %#v", events[0])
	}
	if st, ok := events[1].(*a2a03.TaskStatusUpdateEvent); !ok || st.Status.State != a2a03.TaskStateWorking || st.Final {
		t.Fatalf("second event: %#v", events[1])
	}
	var out strings.Builder
	for i, ev := range events[2 : len(events)-1] {
		a, ok := ev.(*a2a03.TaskArtifactUpdateEvent)
		if !ok || a.TaskID != first.ID || a.Append != (i > 0) {
			t.Fatalf("artifact event %d: %#v", i, ev)
		}
		out.WriteString(a.Artifact.Parts[0].(a2a03.TextPart).Text)
	}
	if out.String() != long {
		t.Fatalf("streamed output differs: %d bytes, want %d", out.Len(), len(long))
	}
	last, ok := events[len(events)-1].(*a2a03.TaskStatusUpdateEvent)
	if !ok || !last.Final || last.Status.State != a2a03.TaskStateCompleted {
		t.Fatalf("last event: %#v", events[len(events)-1])
	}
	if prev, ok := events[len(events)-2].(*a2a03.TaskArtifactUpdateEvent); !ok || !prev.LastChunk {
		t.Fatalf("last artifact chunk not marked: %#v", events[len(events)-2])
	}

	// Resubscribing to the finished task replays its end.
	var re []a2a03.Event
	for ev, err := range c.ResubscribeToTask(context.Background(), &a2a03.TaskIDParams{ID: first.ID}) {
		must(t, err)
		re = append(re, ev)
	}
	if fin, ok := re[len(re)-1].(*a2a03.TaskStatusUpdateEvent); !ok || !fin.Final || fin.Status.State != a2a03.TaskStateCompleted {
		t.Fatalf("resubscribe end: %#v", re)
	}

	// A failing agent ends the stream with a failed final status that says why.
	var fin *a2a03.TaskStatusUpdateEvent
	for ev, err := range c.SendStreamingMessage(context.Background(), userMessage("x", map[string]any{"receiver_id": "broken"})) {
		must(t, err)
		if s, ok := ev.(*a2a03.TaskStatusUpdateEvent); ok && s.Final {
			fin = s
		}
	}
	if fin == nil || fin.Status.State != a2a03.TaskStateFailed || !strings.Contains(fin.Status.Message.Parts[0].(a2a03.TextPart).Text, "model exploded") {
		t.Fatalf("failed stream end: %#v", fin)
	}

	// An unknown receiver is an error event on the stream, not silence.
	var streamErr error
	for _, err := range c.SendStreamingMessage(context.Background(), userMessage("x", map[string]any{"receiver_id": "nobody"})) {
		streamErr = err
	}
	if !errors.Is(streamErr, a2a03.ErrInvalidParams) {
		t.Fatalf("stream to unknown receiver: %v", streamErr)
	}
}

func TestA2AGoClientCancel(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	c, _ := f.a2aClient(t, f.srv.URL, nil)
	ctx := context.Background()

	// A streaming run on the slow agent, canceled from a second call.
	var events []a2a03.Event
	for ev, err := range c.SendStreamingMessage(ctx, userMessage("wait", map[string]any{"receiver_id": "slow"})) {
		must(t, err)
		events = append(events, ev)
		if task, ok := ev.(*a2a03.Task); ok {
			<-f.started // the model is running
			canceled, err := c.CancelTask(ctx, &a2a03.TaskIDParams{ID: task.ID})
			must(t, err)
			if canceled.Status.State != a2a03.TaskStateCanceled {
				t.Fatalf("CancelTask returned state %s", canceled.Status.State)
			}
		}
	}
	last, ok := events[len(events)-1].(*a2a03.TaskStatusUpdateEvent)
	if !ok || !last.Final || last.Status.State != a2a03.TaskStateCanceled {
		t.Fatalf("stream end after cancel: %#v", events[len(events)-1])
	}

	// A non-blocking send (the client's polling mode) returns at once; the
	// task is then canceled and stays canceled for GetTask.
	pc, _ := f.a2aClient(t, f.srv.URL, &a2aclient.Config{Polling: true})
	task := sendTask(t, pc, userMessage("wait", map[string]any{"receiver_id": "slow"}))
	if task.Status.State.Terminal() {
		t.Fatalf("non-blocking send returned a finished task: %s", task.Status.State)
	}
	<-f.started
	_, err := pc.CancelTask(ctx, &a2a03.TaskIDParams{ID: task.ID})
	must(t, err)
	got, err := pc.GetTask(ctx, &a2a03.TaskQueryParams{ID: task.ID})
	must(t, err)
	if got.Status.State != a2a03.TaskStateCanceled {
		t.Fatalf("GetTask after cancel: %s", got.Status.State)
	}
}

func TestA2AGoClientConcurrent(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	c, _ := f.a2aClient(t, f.srv.URL, nil)
	const n = 1000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			text := fmt.Sprintf("message %d", i)
			res, err := c.SendMessage(context.Background(), userMessage(text, nil))
			if err != nil {
				errs <- err
				return
			}
			task, ok := res.(*a2a03.Task)
			if !ok || task.Status.State != a2a03.TaskStateCompleted || len(task.Artifacts) != 1 ||
				task.Artifacts[0].Parts[0].(a2a03.TextPart).Text != text {
				errs <- fmt.Errorf("message %d: wrong answer %#v", i, res)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCloseCancelsBackgroundRuns(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	pc, _ := f.a2aClient(t, f.srv.URL, &a2aclient.Config{Polling: true})
	task := sendTask(t, pc, userMessage("wait", map[string]any{"receiver_id": "slow"}))
	<-f.started
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	must(t, f.h.Close(ctx))
	// After Close the stored task says how it ended; new work is refused.
	body := rpc(t, f, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"`+string(task.ID)+`"}}`)
	if !strings.Contains(body, `"state":"canceled"`) {
		t.Fatalf("task after Close: %s", body)
	}
	body = rpc(t, f, `{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}}}`)
	if !strings.Contains(body, `"error"`) {
		t.Fatalf("send after Close: %s", body)
	}
}

func TestResubscribeToRunningTask(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	pc, _ := f.a2aClient(t, f.srv.URL, &a2aclient.Config{Polling: true})
	ctx := context.Background()
	task := sendTask(t, pc, userMessage("wait", map[string]any{"receiver_id": "slow"}))
	<-f.started
	var events []a2a03.Event
	for ev, err := range pc.ResubscribeToTask(ctx, &a2a03.TaskIDParams{ID: task.ID}) {
		must(t, err)
		events = append(events, ev)
		if snap, ok := ev.(*a2a03.Task); ok {
			if snap.Status.State != a2a03.TaskStateWorking {
				t.Fatalf("resubscribe snapshot state %s", snap.Status.State)
			}
			_, err := pc.CancelTask(ctx, &a2a03.TaskIDParams{ID: task.ID})
			must(t, err)
		}
	}
	last, ok := events[len(events)-1].(*a2a03.TaskStatusUpdateEvent)
	if len(events) != 2 || !ok || !last.Final || last.Status.State != a2a03.TaskStateCanceled {
		t.Fatalf("resubscribe events: %#v", events)
	}
}

// bigModel answers with n bytes.
type bigModel struct{ n int }

func (m bigModel) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return &agent.Response{Content: strings.Repeat("x", m.n)}, nil
}

// A message/stream client that stops reading (alive, but its socket full)
// must not keep Close waiting, nor leave the stream's goroutine blocked in
// a write for as long as the connection lives: Close ends the streams.
func TestCloseEndsStuckStream(t *testing.T) {
	eng := axocoatl.New(axocoatl.Options{})
	must(t, eng.AddAgent(agent.Spec{ID: "big"}, bigModel{32 << 20}))
	h, err := a2a.New(a2a.Config{})
	must(t, err)
	must(t, eng.Use(context.Background(), h))
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer eng.Close(context.Background())

	// The run's end is waited for as its event: sampling Agents().Running
	// missed a run that started and ended between two samples (a loaded
	// machine deschedules the sampler for longer than the run).
	ended, err := eng.Bus().Subscribe(lattice.Filter{Types: []string{axocoatl.EventTaskCompleted, axocoatl.EventAgentFailed}}, 1)
	must(t, err)
	defer ended.Close()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	must(t, err)
	defer conn.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}}}`
	fmt.Fprintf(conn, "POST /a2a HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", conn.RemoteAddr(), len(body), body)
	// The run ends at once; the stream then blocks on the unread socket.
	select {
	case <-ended.Events():
	case <-time.After(time.Minute):
		t.Fatal("the run did not end within a minute")
	}
	time.Sleep(200 * time.Millisecond) // the stream writes until the socket is full
	// Close ends the stream's write within closeWriteGrace (1 s); 10 s is
	// the failure bound of a loaded machine, far from "as long as the
	// connection lives" (the defect this guards waited 30 s and more).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := h.Close(ctx); err != nil {
		t.Fatalf("close with a client not reading its stream: %v", err)
	}
	t.Logf("Close returned after %s", time.Since(start))
}

// A client reading its stream still gets the final event when Close ends
// the run under it: the stream's end is bounded, not cut.
func TestCloseFinishesReadingStream(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	c, _ := f.a2aClient(t, f.srv.URL, nil)
	var events []a2a03.Event
	var closeErr error
	var wg sync.WaitGroup
	for ev, err := range c.SendStreamingMessage(context.Background(), userMessage("wait", map[string]any{"receiver_id": "slow"})) {
		must(t, err)
		events = append(events, ev)
		if _, ok := ev.(*a2a03.Task); ok {
			<-f.started
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				closeErr = f.h.Close(ctx)
			})
		}
	}
	wg.Wait()
	must(t, closeErr)
	last, ok := events[len(events)-1].(*a2a03.TaskStatusUpdateEvent)
	if !ok || !last.Final || last.Status.State != a2a03.TaskStateCanceled {
		t.Fatalf("stream end after Close: %#v", events[len(events)-1])
	}
}

// A stream holds its working status only while the run is quick: a run
// that lasts gets it within moments, before its end.
func TestStreamSaysWorkingWhileRunning(t *testing.T) {
	f := newFixture(t, a2a.Config{StreamKeepAlive: time.Hour})
	c, _ := f.a2aClient(t, f.srv.URL, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	for ev, err := range c.SendStreamingMessage(ctx, userMessage("wait", map[string]any{"receiver_id": "slow"})) {
		must(t, err)
		n++
		if n == 1 {
			<-f.started
			continue
		}
		st, ok := ev.(*a2a03.TaskStatusUpdateEvent)
		if !ok || st.Status.State != a2a03.TaskStateWorking || st.Final {
			t.Fatalf("second event of a running task: %#v, want working", ev)
		}
		break // the run is still blocked: working came before any end
	}
	if n != 2 {
		t.Fatalf("stream gave %d events, want the task then working", n)
	}
}
