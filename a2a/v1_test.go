package a2a_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	v1client "github.com/a2aproject/a2a-go/v2/a2aclient"
	v1card "github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/axocoatl/axocoatl-go/a2a"
)

// pathRecorder remembers the paths a client requested, so a test can tell
// which binding the a2a-go/v2 client really used.
type pathRecorder struct {
	mu    sync.Mutex
	paths []string
	next  http.RoundTripper
}

func (p *pathRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.paths = append(p.paths, r.Method+" "+r.URL.Path+" "+r.Header.Get("A2A-Version"))
	p.mu.Unlock()
	return p.next.RoundTrip(r)
}

func (p *pathRecorder) seen() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.paths, "\n")
}

// v1Client resolves the card at base with a2a-go/v2's resolver and connects
// over the given binding (JSONRPC or HTTP+JSON) as an a2a-go/v2 user would.
func (f *fixture) v1Client(t testing.TB, base string, binding a2a1.TransportProtocol) (*v1client.Client, *a2a1.AgentCard, *pathRecorder) {
	t.Helper()
	ctx := context.Background()
	rec := &pathRecorder{next: f.client.Transport}
	hc := &http.Client{Transport: rec, Timeout: f.client.Timeout}
	card, err := v1card.NewResolver(hc).Resolve(ctx, base)
	if err != nil {
		t.Fatalf("resolve card at %s: %v", base, err)
	}
	c, err := v1client.NewFromCard(ctx, card,
		v1client.WithJSONRPCTransport(hc), v1client.WithRESTTransport(hc),
		v1client.WithConfig(v1client.Config{PreferredTransports: []a2a1.TransportProtocol{binding}}))
	if err != nil {
		t.Fatalf("new a2a-go/v2 client from card: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c, card, rec
}

func v1Message(text string, meta map[string]any) *a2a1.SendMessageRequest {
	m := a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart(text))
	m.Metadata = meta
	return &a2a1.SendMessageRequest{Message: m}
}

func v1Send(t testing.TB, c *v1client.Client, req *a2a1.SendMessageRequest) *a2a1.Task {
	t.Helper()
	res, err := c.SendMessage(context.Background(), req)
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a1.Task)
	if !ok {
		t.Fatalf("SendMessage result is %T, want *a2a1.Task", res)
	}
	return task
}

func v1Output(t testing.TB, task *a2a1.Task) string {
	t.Helper()
	if len(task.Artifacts) != 1 || len(task.Artifacts[0].Parts) != 1 {
		t.Fatalf("task %s: want one artifact with one part, got %+v", task.ID, task.Artifacts)
	}
	return task.Artifacts[0].Parts[0].Text()
}

// The a2a-go/v2 client, over JSON-RPC and over HTTP+JSON: the card, send,
// get, list, stream, cancel and the typed errors, on the instance endpoint
// and on a per-agent one.
func TestV1ClientBothBindings(t *testing.T) {
	for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			f := newFixture(t, a2a.Config{})
			ctx := context.Background()
			c, card, rec := f.v1Client(t, f.srv.URL, binding)
			if len(card.SupportedInterfaces) != 2 || card.SupportedInterfaces[0].URL != f.srv.URL+"/a2a" ||
				card.SupportedInterfaces[1].ProtocolBinding != a2a1.TransportProtocolHTTPJSON || card.SupportedInterfaces[1].ProtocolVersion != "1.0" {
				t.Fatalf("supportedInterfaces: %+v", card.SupportedInterfaces)
			}

			task := v1Send(t, c, v1Message("hello there", nil))
			if task.Status.State != a2a1.TaskStateCompleted || v1Output(t, task) != "hello there" {
				t.Fatalf("default agent: %+v", task)
			}
			if len(task.History) != 1 || task.History[0].Role != a2a1.MessageRoleUser || task.History[0].TaskID != task.ID {
				t.Fatalf("history: %+v", task.History)
			}
			named := v1Send(t, c, v1Message("hi", map[string]any{"receiver_id": "upper"}))
			if got := v1Output(t, named); got != "upper: hi" {
				t.Fatalf("named agent output %q", got)
			}
			failed := v1Send(t, c, v1Message("x", map[string]any{"receiver_id": "broken"}))
			if failed.Status.State != a2a1.TaskStateFailed || failed.Status.Message == nil ||
				!strings.Contains(failed.Status.Message.Parts[0].Text(), "model exploded") {
				t.Fatalf("failed task: %+v", failed)
			}

			got, err := c.GetTask(ctx, &a2a1.GetTaskRequest{ID: named.ID})
			must(t, err)
			if got.Status.State != a2a1.TaskStateCompleted || v1Output(t, got) != "upper: hi" {
				t.Fatalf("GetTask: %+v", got)
			}
			zero := 0
			got, err = c.GetTask(ctx, &a2a1.GetTaskRequest{ID: named.ID, HistoryLength: &zero})
			must(t, err)
			if len(got.History) != 0 {
				t.Fatalf("historyLength 0 gave %+v", got.History)
			}

			// ListTasks: newest first, paged, filtered.
			list, err := c.ListTasks(ctx, &a2a1.ListTasksRequest{PageSize: 2})
			must(t, err)
			if list.TotalSize != 3 || len(list.Tasks) != 2 || list.Tasks[0].ID != failed.ID || list.Tasks[1].ID != named.ID || list.NextPageToken == "" {
				t.Fatalf("ListTasks page 1: %+v", list)
			}
			list, err = c.ListTasks(ctx, &a2a1.ListTasksRequest{PageSize: 2, PageToken: list.NextPageToken})
			must(t, err)
			if len(list.Tasks) != 1 || list.Tasks[0].ID != task.ID || list.NextPageToken != "" {
				t.Fatalf("ListTasks page 2: %+v", list)
			}
			list, err = c.ListTasks(ctx, &a2a1.ListTasksRequest{Status: a2a1.TaskStateFailed})
			must(t, err)
			if len(list.Tasks) != 1 || list.Tasks[0].ID != failed.ID {
				t.Fatalf("ListTasks status filter: %+v", list)
			}

			// Typed errors.
			if _, err := c.GetTask(ctx, &a2a1.GetTaskRequest{ID: "no-such-task"}); !errors.Is(err, a2a1.ErrTaskNotFound) {
				t.Fatalf("GetTask unknown: %v, want ErrTaskNotFound", err)
			}
			if _, err := c.CancelTask(ctx, &a2a1.CancelTaskRequest{ID: named.ID}); !errors.Is(err, a2a1.ErrTaskNotCancelable) {
				t.Fatalf("CancelTask completed: %v, want ErrTaskNotCancelable", err)
			}
			if _, err := c.SendMessage(ctx, v1Message("x", map[string]any{"receiver_id": "nobody"})); !errors.Is(err, a2a1.ErrInvalidParams) ||
				!strings.Contains(err.Error(), `"nobody"`) {
				t.Fatalf("unknown receiver: %v", err)
			}

			// A stream: the task, working, the output (one artifact update,
			// or the text and an empty closing chunk when the writer sent
			// the delta before the run ended), completed.
			var events []a2a1.Event
			for ev, err := range c.SendStreamingMessage(ctx, v1Message("streamed", nil)) {
				must(t, err)
				events = append(events, ev)
			}
			if n := len(events); n != 4 && n != 5 {
				t.Fatalf("stream: want task, working, artifact updates, completed; got %d events %#v", len(events), events)
			}
			first, ok := events[0].(*a2a1.Task)
			if !ok || first.Status.State != a2a1.TaskStateSubmitted {
				t.Fatalf("first event %#v", events[0])
			}
			var text strings.Builder
			for i, ev := range events[2 : len(events)-1] {
				a, ok := ev.(*a2a1.TaskArtifactUpdateEvent)
				if !ok || a.LastChunk != (i == len(events)-4) || a.Append != (i > 0) {
					t.Fatalf("artifact event %d %#v", i, ev)
				}
				text.WriteString(a.Artifact.Parts[0].Text())
			}
			if text.String() != "streamed" {
				t.Fatalf("streamed artifact %q", text.String())
			}
			if s, ok := events[len(events)-1].(*a2a1.TaskStatusUpdateEvent); !ok || s.Status.State != a2a1.TaskStateCompleted {
				t.Fatalf("last event %#v", events[len(events)-1])
			}

			// Cancel a running task from a second call; its stream ends canceled.
			var last a2a1.Event
			for ev, err := range c.SendStreamingMessage(ctx, v1Message("wait", map[string]any{"receiver_id": "slow"})) {
				must(t, err)
				last = ev
				if tk, ok := ev.(*a2a1.Task); ok {
					<-f.started
					canceled, err := c.CancelTask(ctx, &a2a1.CancelTaskRequest{ID: tk.ID})
					must(t, err)
					if canceled.Status.State != a2a1.TaskStateCanceled {
						t.Fatalf("CancelTask returned %s", canceled.Status.State)
					}
				}
			}
			if s, ok := last.(*a2a1.TaskStatusUpdateEvent); !ok || s.Status.State != a2a1.TaskStateCanceled {
				t.Fatalf("stream end after cancel: %#v", last)
			}

			// SubscribeToTask follows a running task to its end; on a
			// finished one it is UnsupportedOperation (a2a.proto).
			for _, err := range c.SubscribeToTask(ctx, &a2a1.SubscribeToTaskRequest{ID: first.ID}) {
				if !errors.Is(err, a2a1.ErrUnsupportedOperation) {
					t.Fatalf("SubscribeToTask on a completed task: %v, want ErrUnsupportedOperation", err)
				}
			}
			bg := v1Message("wait", map[string]any{"receiver_id": "slow"})
			bg.Config = &a2a1.SendMessageConfig{ReturnImmediately: true}
			running := v1Send(t, c, bg)
			if running.Status.State.Terminal() {
				t.Fatalf("returnImmediately gave a finished task: %s", running.Status.State)
			}
			<-f.started
			var sub []a2a1.Event
			for ev, err := range c.SubscribeToTask(ctx, &a2a1.SubscribeToTaskRequest{ID: running.ID}) {
				must(t, err)
				sub = append(sub, ev)
				if _, ok := ev.(*a2a1.Task); ok {
					_, err := c.CancelTask(ctx, &a2a1.CancelTaskRequest{ID: running.ID})
					must(t, err)
				}
			}
			if len(sub) != 2 {
				t.Fatalf("subscribe events: %#v", sub)
			}
			if s, ok := sub[1].(*a2a1.TaskStatusUpdateEvent); !ok || s.Status.State != a2a1.TaskStateCanceled {
				t.Fatalf("subscribe end: %#v", sub)
			}

			// Push configs and the extended card are not offered.
			if _, err := c.GetExtendedAgentCard(ctx, &a2a1.GetExtendedAgentCardRequest{}); err == nil {
				t.Fatal("GetExtendedAgentCard succeeded")
			}

			// The client spoke the binding asked for, with the 1.0 header.
			seen := rec.seen()
			want := "POST /a2a 1.0"
			if binding == a2a1.TransportProtocolHTTPJSON {
				want = "POST /a2a/message:send 1.0"
			}
			if !strings.Contains(seen, want) {
				t.Fatalf("requests do not include %q:\n%s", want, seen)
			}

			// A per-agent endpoint: its own card, its agent by default, and
			// only its own tasks.
			pc, pcard, _ := f.v1Client(t, f.srv.URL+"/a2a/agents/upper", binding)
			if pcard.SupportedInterfaces[0].URL != f.srv.URL+"/a2a/agents/upper" || pcard.Name != "Upper" {
				t.Fatalf("per-agent card: %+v", pcard)
			}
			if got := v1Output(t, v1Send(t, pc, v1Message("x", nil))); got != "upper: x" {
				t.Fatalf("per-agent endpoint ran %q", got)
			}
			if _, err := pc.GetTask(ctx, &a2a1.GetTaskRequest{ID: task.ID}); !errors.Is(err, a2a1.ErrTaskNotFound) {
				t.Fatalf("another agent's task through a per-agent endpoint: %v", err)
			}
		})
	}
}

// One store serves both generations: a task sent over 0.3 reads over 1.0,
// and one sent over 1.0 reads over 0.3, its message converted.
func TestCrossGenerationTasks(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	ctx := context.Background()
	c03, _ := f.a2aClient(t, f.srv.URL, nil)
	for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		c10, _, _ := f.v1Client(t, f.srv.URL, binding)

		old := sendTask(t, c03, &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser,
			a2a03.TextPart{Text: "from 0.3"}, a2a03.DataPart{Data: map[string]any{"k": "v"}})})
		got, err := c10.GetTask(ctx, &a2a1.GetTaskRequest{ID: a2a1.TaskID(old.ID)})
		must(t, err)
		if got.Status.State != a2a1.TaskStateCompleted || v1Output(t, got) != "from 0.3\n{\"k\":\"v\"}" ||
			len(got.History) != 1 || got.History[0].Role != a2a1.MessageRoleUser || got.History[0].Parts[0].Text() != "from 0.3" ||
			got.History[0].Parts[1].Data().(map[string]any)["k"] != "v" {
			t.Fatalf("%s: 0.3 task read over 1.0: %+v", binding, got)
		}

		m := a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("from 1.0"), a2a1.NewDataPart([]any{1.0, "two"}))
		m.Metadata = map[string]any{"receiver_id": "upper"}
		neu := v1Send(t, c10, &a2a1.SendMessageRequest{Message: m})
		back, err := c03.GetTask(ctx, &a2a03.TaskQueryParams{ID: a2a03.TaskID(neu.ID)})
		must(t, err)
		if back.Status.State != a2a03.TaskStateCompleted || outputOf(t, back) != "upper: from 1.0\n[1,\"two\"]" ||
			len(back.History) != 1 || back.History[0].Role != a2a03.MessageRoleUser ||
			back.History[0].Parts[0].(a2a03.TextPart).Text != "from 1.0" {
			t.Fatalf("%s: 1.0 task read over 0.3: %+v", binding, back)
		}
		if d, ok := back.History[0].Parts[1].(a2a03.DataPart); !ok || d.Data["value"] == nil {
			t.Fatalf("%s: a 1.0 list data part over 0.3: %#v", binding, back.History[0].Parts[1])
		}
		// Cancel across generations: 1.0 cancels what 0.3 started.
		pc, _ := f.a2aClient(t, f.srv.URL, nil)
		slow := sendTaskNonBlocking(t, pc)
		<-f.started
		canceled, err := c10.CancelTask(ctx, &a2a1.CancelTaskRequest{ID: a2a1.TaskID(slow.ID)})
		must(t, err)
		if canceled.Status.State != a2a1.TaskStateCanceled {
			t.Fatalf("%s: cross-generation cancel: %s", binding, canceled.Status.State)
		}
	}
}

func sendTaskNonBlocking(t testing.TB, c interface {
	SendMessage(context.Context, *a2a03.MessageSendParams) (a2a03.SendMessageResult, error)
}) *a2a03.Task {
	t.Helper()
	no := false
	p := userMessage("wait", map[string]any{"receiver_id": "slow"})
	p.Config = &a2a03.MessageSendConfig{Blocking: &no}
	res, err := c.SendMessage(context.Background(), p)
	must(t, err)
	return res.(*a2a03.Task)
}

// ListTasks' status timestamp filter works with the a2a-go/v2 client on
// both bindings: over HTTP+JSON it sends the filter as lastUpdatedAfter
// (a2a.proto names it statusTimestampAfter; both are read).
func TestV1ListTasksTimestampFilter(t *testing.T) {
	for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			f := newFixture(t, a2a.Config{})
			c, _, _ := f.v1Client(t, f.srv.URL, binding)
			v1Send(t, c, v1Message("one", nil))
			ctx := context.Background()
			all, err := c.ListTasks(ctx, &a2a1.ListTasksRequest{})
			must(t, err)
			if len(all.Tasks) != 1 {
				t.Fatalf("ListTasks without a filter: %d tasks, want 1", len(all.Tasks))
			}
			future := time.Now().Add(time.Hour)
			none, err := c.ListTasks(ctx, &a2a1.ListTasksRequest{StatusTimestampAfter: &future})
			must(t, err)
			if len(none.Tasks) != 0 {
				t.Fatalf("ListTasks updated after %s: %d tasks, want none", future, len(none.Tasks))
			}
		})
	}
}
