package a2a_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	v1client "github.com/a2aproject/a2a-go/v2/a2aclient"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/egress"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/secret"
)

// The push tests run the real egress module beside the handler, meeting
// only through the Engine (axocoatl.Engine.Pusher), as the daemon does.

const (
	pushSecret = "whsec_cHVzaC1zaWduaW5nLWtleS1mb3ItdGVzdHM=" // base64 of a test key
	pushCred   = "client-credential-5ecret"
	pushToken  = "task-token-1"
)

// gatedModel answers "done: <input>" once release is closed.
type gatedModel struct{ release chan struct{} }

func (m gatedModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	select {
	case <-m.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &agent.Response{Content: "done: " + req.Messages[len(req.Messages)-1].Content}, nil
}

// pushFixture is a fixture whose Engine also runs egress with push
// delivery; logs go to logs.
type pushFixture struct {
	*fixture
	eg         *egress.Module
	release    chan struct{}
	askRelease chan struct{}
	logs       *testutil.SyncBuffer
}

func newPushFixture(t testing.TB, cfg a2a.Config, push egress.Push) *pushFixture {
	t.Helper()
	return newPushFixtureWith(t, cfg, push, axocoatl.HTTPOptions{})
}

// newPushFixtureWith is newPushFixture with the Engine's HTTP guard
// options (tokens).
func newPushFixtureWith(t testing.TB, cfg a2a.Config, push egress.Push, hopts axocoatl.HTTPOptions) *pushFixture {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := &fixture{eng: axocoatl.New(axocoatl.Options{Logger: log, HTTP: hopts}), started: make(chan string, 16)}
	pf := &pushFixture{fixture: f, release: make(chan struct{}), logs: logs}
	must(t, f.eng.AddAgent(agent.Spec{ID: "gated", Timeout: time.Minute}, gatedModel{pf.release}))
	must(t, f.eng.AddAgent(agent.Spec{ID: "slow", Timeout: time.Minute}, slowModel{f.started}))
	must(t, f.eng.AddAgent(agent.Spec{ID: "upper"}, prefixModel{"upper"}))
	// "asker" calls tool "ask", which, once askRelease is closed, puts a
	// question to the run's caller (input-required).
	pf.askRelease = make(chan struct{})
	must(t, f.eng.RegisterTool(axocoatl.Tool{Name: "ask", Description: "Asks the user.",
		Call: func(ctx context.Context, c axocoatl.ToolCall) (axocoatl.ToolResult, error) {
			select {
			case <-pf.askRelease:
			case <-ctx.Done():
				return axocoatl.ToolResult{}, ctx.Err()
			}
			a, err := axocoatl.UserPrompterFrom(ctx).PromptUser(ctx, axocoatl.UserPrompt{Message: "Where to?", Schema: questionSchema})
			if err != nil {
				return axocoatl.ToolResult{Content: err.Error(), IsError: true}, nil
			}
			b, _ := json.Marshal(a.Content)
			return axocoatl.ToolResult{Content: string(b)}, nil
		}}))
	must(t, f.eng.AddAgent(agent.Spec{ID: "asker", Tools: []string{"ask"}, Timeout: time.Minute}, toolModel{"ask", make(chan string, 4)}))
	eg, err := egress.New(egress.Config{Push: push})
	must(t, err)
	must(t, f.eng.Use(context.Background(), eg))
	pf.eg = eg
	h, err := a2a.New(cfg)
	must(t, err)
	must(t, f.eng.Use(context.Background(), h))
	f.h = h
	f.srv = httptest.NewServer(h)
	f.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	t.Cleanup(func() {
		f.client.CloseIdleConnections()
		f.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := f.eng.Close(ctx); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	return pf
}

// fastPush retries at once: the tests wait on what arrives, not on time.
var fastPush = egress.Push{Enabled: true, Secret: pushSecret, BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond}

// notice is one request a receiver got.
type notice struct {
	header http.Header
	body   []byte
}

// receiver records what is POSTed to it; while down is set it answers 503.
type receiver struct {
	srv   *httptest.Server
	got   chan notice
	down  atomic.Bool
	fails atomic.Int64
}

func newReceiver(t testing.TB) *receiver {
	rc := &receiver{got: make(chan notice, 64)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if rc.down.Load() {
			rc.fails.Add(1)
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		rc.got <- notice{r.Header.Clone(), b}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// next waits for the next notification, checks its Authorization, token
// and signature, and returns its body.
func (rc *receiver) next(t testing.TB, tokenHeader string) []byte {
	t.Helper()
	select {
	case n := <-rc.got:
		if got := n.header.Get("Authorization"); got != "Bearer "+pushCred {
			t.Errorf("Authorization %q, want the config's", got)
		}
		if got := n.header.Get(tokenHeader); got != pushToken {
			t.Errorf("%s %q, want %q", tokenHeader, got, pushToken)
		}
		if err := egress.Verify(pushSecret, n.header, n.body, 0); err != nil {
			t.Errorf("signature: %v", err)
		}
		return n.body
	case <-time.After(30 * time.Second):
		t.Fatal("no push notification within 30s")
	}
	return nil
}

// nextEnd reads the n 1.0 notifications of a task's end (they may arrive
// in any order) and returns what each held, and the final task.
func nextEnd(t testing.TB, rc *receiver, n int) (kinds []string, final *a2a1.Task) {
	t.Helper()
	for len(kinds) < n {
		var sr a2a1.StreamResponse
		body := rc.next(t, "A2A-Notification-Token")
		if err := json.Unmarshal(body, &sr); err != nil {
			t.Fatalf("notification %s: %v", body, err)
		}
		switch ev := sr.Event.(type) {
		case *a2a1.Task:
			kinds, final = append(kinds, "task:"+string(ev.Status.State)), ev
		case *a2a1.TaskStatusUpdateEvent:
			kinds = append(kinds, "status:"+string(ev.Status.State))
		case *a2a1.TaskArtifactUpdateEvent:
			kinds = append(kinds, "artifact:"+ev.Artifact.Parts[0].Text())
		default:
			t.Fatalf("unexpected event %T", ev)
		}
	}
	if final == nil {
		t.Fatalf("no final task among %v", kinds)
	}
	return kinds, final
}

// An a2a-go/v2 client registers a config (JSON-RPC and HTTP+JSON); the
// receiver gets the task's updates with the config's Authorization and
// token and a valid signature; Get and List redact the credential; Delete
// removes it.
func TestPushV1(t *testing.T) {
	for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			rc := newReceiver(t) // closed after the Engine
			f := newPushFixture(t, a2a.Config{PushAllowedHosts: []string{"127.0.0.1"}}, fastPush)
			c, card, _ := f.v1Client(t, f.srv.URL, binding)
			if !card.Capabilities.PushNotifications {
				t.Fatal("card: capabilities.pushNotifications false with push delivery enabled")
			}
			ctx := context.Background()
			req := v1Message("hello", map[string]any{a2a.ReceiverKey: "gated"})
			req.Config = &a2a1.SendMessageConfig{ReturnImmediately: true}
			task := v1Send(t, c, req)

			pc, err := c.CreateTaskPushConfig(ctx, &a2a1.PushConfig{TaskID: task.ID, ID: "cfg1", URL: rc.srv.URL + "/hook",
				Token: pushToken, Auth: &a2a1.PushAuthInfo{Scheme: "Bearer", Credentials: pushCred}})
			if err != nil {
				t.Fatalf("CreateTaskPushConfig: %v", err)
			}
			if pc.ID != "cfg1" || pc.Auth == nil || pc.Auth.Credentials != "" || pc.Auth.Scheme != "Bearer" {
				t.Fatalf("create answered %+v (auth %+v): want the config with its credential left out", pc, pc.Auth)
			}
			var first a2a1.StreamResponse
			must(t, json.Unmarshal(rc.next(t, "A2A-Notification-Token"), &first))
			if st, ok := first.Event.(*a2a1.TaskStatusUpdateEvent); !ok || st.Status.State.Terminal() {
				t.Fatalf("first notification %#v, want the running task's status", first.Event)
			}

			got, err := c.GetTaskPushConfig(ctx, &a2a1.GetTaskPushConfigRequest{TaskID: task.ID, ID: "cfg1"})
			if err != nil || got.URL != rc.srv.URL+"/hook" || got.Auth == nil || got.Auth.Credentials != "" {
				t.Fatalf("GetTaskPushConfig = %+v, %v", got, err)
			}
			list, err := c.ListTaskPushConfigs(ctx, &a2a1.ListTaskPushConfigRequest{TaskID: task.ID})
			if err != nil || len(list) != 1 || list[0].Auth.Credentials != "" {
				t.Fatalf("ListTaskPushConfigs = %+v, %v", list, err)
			}

			close(f.release)
			kinds, final := nextEnd(t, rc, 3)
			want := []string{"artifact:done: hello", "status:" + string(a2a1.TaskStateCompleted), "task:" + string(a2a1.TaskStateCompleted)}
			if !sameSet(kinds, want) {
				t.Fatalf("end notifications %v, want %v (in any order)", kinds, want)
			}
			if final.ID != task.ID || len(final.Artifacts) != 1 {
				t.Fatalf("final task %+v", final)
			}

			must(t, c.DeleteTaskPushConfig(ctx, &a2a1.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "cfg1"}))
			if list, err := c.ListTaskPushConfigs(ctx, &a2a1.ListTaskPushConfigRequest{TaskID: task.ID}); err != nil || len(list) != 0 {
				t.Fatalf("after delete: %+v, %v", list, err)
			}
			if _, err := c.GetTaskPushConfig(ctx, &a2a1.GetTaskPushConfigRequest{TaskID: task.ID, ID: "cfg1"}); err == nil {
				t.Fatal("GetTaskPushConfig after delete: no error")
			}
			if strings.Contains(f.logs.String(), pushCred) {
				t.Fatal("the client's credential is in the logs")
			}
		})
	}
}

// A task that asks its caller for input while a push config is registered
// (the caller left: ReturnImmediately) pushes an input-required status
// with the question; answered, its end is pushed as ever.
func TestPushInputRequired(t *testing.T) {
	rc := newReceiver(t)
	f := newPushFixture(t, a2a.Config{PushAllowedHosts: []string{"127.0.0.1"}}, fastPush)
	c, _, _ := f.v1Client(t, f.srv.URL, a2a1.TransportProtocolJSONRPC)
	ctx := context.Background()
	req := v1Message(`{}`, map[string]any{a2a.ReceiverKey: "asker"})
	req.Config = &a2a1.SendMessageConfig{ReturnImmediately: true}
	task := v1Send(t, c, req)
	_, err := c.CreateTaskPushConfig(ctx, &a2a1.PushConfig{TaskID: task.ID, ID: "cfg1", URL: rc.srv.URL + "/hook",
		Token: pushToken, Auth: &a2a1.PushAuthInfo{Scheme: "Bearer", Credentials: pushCred}})
	must(t, err)
	var first a2a1.StreamResponse
	must(t, json.Unmarshal(rc.next(t, "A2A-Notification-Token"), &first))
	if st, ok := first.Event.(*a2a1.TaskStatusUpdateEvent); !ok || st.Status.State.Terminal() || st.Status.State == a2a1.TaskStateInputRequired {
		t.Fatalf("first notification %#v, want the running task's status", first.Event)
	}

	close(f.askRelease) // the tool asks now, after the registration
	var asked a2a1.StreamResponse
	must(t, json.Unmarshal(rc.next(t, "A2A-Notification-Token"), &asked))
	st, ok := asked.Event.(*a2a1.TaskStatusUpdateEvent)
	if !ok || st.Status.State != a2a1.TaskStateInputRequired || st.Status.Message == nil ||
		!strings.Contains(st.Status.Message.Parts[0].Text(), "Where to?") {
		t.Fatalf("after the question: %#v, want an input-required status with the question", asked.Event)
	}

	done := v1Send(t, c, v1Answer(task, a2a1.NewDataPart(map[string]any{"city": "Oaxaca"})))
	if done.Status.State != a2a1.TaskStateCompleted {
		t.Fatalf("after the answer: %s", done.Status.State)
	}
	kinds, final := nextEnd(t, rc, 3)
	if final.Status.State != a2a1.TaskStateCompleted {
		t.Fatalf("end notifications %v: final %s", kinds, final.Status.State)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// A receiver that is down (503) gets the notifications once it is up:
// egress retries them; its delivery log shows the failed attempts, never
// the credential.
func TestPushRetriedUntilReceiverUp(t *testing.T) {
	push := fastPush
	push.MaxAttempts = 1000
	rc := newReceiver(t)
	f := newPushFixture(t, a2a.Config{PushAllowedHosts: []string{"127.0.0.1"}}, push)
	rc.down.Store(true)
	c, _, _ := f.v1Client(t, f.srv.URL, a2a1.TransportProtocolJSONRPC)
	req := v1Message("again", map[string]any{a2a.ReceiverKey: "gated"})
	req.Config = &a2a1.SendMessageConfig{ReturnImmediately: true,
		PushConfig: &a2a1.PushConfig{URL: rc.srv.URL, Token: pushToken, Auth: &a2a1.PushAuthInfo{Scheme: "Bearer", Credentials: pushCred}}}
	task := v1Send(t, c, req)
	close(f.release)
	// Wait until the receiver has refused several attempts.
	deadline := time.Now().Add(30 * time.Second)
	for rc.fails.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("receiver refused %d attempts in 30s, want 3", rc.fails.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	ds, err := f.eg.Deliveries(egress.PushWebhook, "", 100)
	must(t, err)
	if len(ds) == 0 {
		t.Fatal("the delivery log has no push delivery")
	}
	var sawFailure bool
	for _, d := range ds {
		sawFailure = sawFailure || d.LastError != ""
	}
	if !sawFailure {
		t.Fatalf("no delivery shows the 503: %+v", ds)
	}
	b, _ := json.Marshal(ds)
	if strings.Contains(string(b), pushCred) {
		t.Fatal("the delivery log shows the client's credential")
	}
	rc.down.Store(false)
	// The status when the send registered it (submitted), then the end.
	kinds, final := nextEnd(t, rc, 4)
	if want := []string{"status:" + string(a2a1.TaskStateSubmitted), "artifact:done: again", "status:" + string(a2a1.TaskStateCompleted),
		"task:" + string(a2a1.TaskStateCompleted)}; !sameSet(kinds, want) {
		t.Fatalf("notifications %v, want %v", kinds, want)
	}
	if final.ID != task.ID || final.Status.State != a2a1.TaskStateCompleted {
		t.Fatalf("final task %+v", final)
	}
}

// A receiver that is not listening at all (connection refused) gets the
// notifications once it listens on its address.
func TestPushRetriedUntilReceiverListens(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := l.Addr().String()
	must(t, l.Close())
	got := make(chan notice, 16)
	recv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- notice{r.Header.Clone(), b}
	}))
	t.Cleanup(recv.Close)
	push := fastPush
	push.MaxAttempts = 1000
	f := newPushFixture(t, a2a.Config{PushAllowedHosts: []string{"127.0.0.1"}}, push)
	c, _, _ := f.v1Client(t, f.srv.URL, a2a1.TransportProtocolJSONRPC)
	req := v1Message("later", map[string]any{a2a.ReceiverKey: "upper"})
	req.Config = &a2a1.SendMessageConfig{PushConfig: &a2a1.PushConfig{URL: "http://" + addr + "/cb",
		Auth: &a2a1.PushAuthInfo{Scheme: "Bearer", Credentials: pushCred}}}
	task := v1Send(t, c, req)
	// Wait until a delivery has failed twice on the closed port.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ds, err := f.eg.Deliveries(egress.PushWebhook, "", 100)
		must(t, err)
		failed := 0
		for _, d := range ds {
			if len(d.Attempts) >= 2 && strings.Contains(d.LastError, "refused") {
				failed++
			}
		}
		if failed > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delivery failed twice with connection refused in 30s: %+v", ds)
		}
		time.Sleep(5 * time.Millisecond)
	}
	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	_ = recv.Listener.Close() // the one NewUnstartedServer made
	recv.Listener = l2
	recv.Start()
	var final *a2a1.Task
	for final == nil {
		select {
		case n := <-got:
			if n.header.Get("Authorization") != "Bearer "+pushCred || egress.Verify(pushSecret, n.header, n.body, 0) != nil {
				t.Fatalf("notification without the Authorization or a valid signature: %v", n.header)
			}
			var sr a2a1.StreamResponse
			must(t, json.Unmarshal(n.body, &sr))
			if tk, ok := sr.Event.(*a2a1.Task); ok {
				final = tk
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no final task within 30s of the receiver listening")
		}
	}
	if final.ID != task.ID || final.Status.State != a2a1.TaskStateCompleted {
		t.Fatalf("final task %+v", final)
	}
}

// A config pointing at 127.0.0.1 (or another loopback, private, link-local
// or metadata address) is refused at once, saying why and how to allow it,
// when its host is not in a2a.push_allowed_hosts. Bad configs (scheme,
// credentials in the URL, an oversized URL, a header injection) are
// refused too.
//
// Guards: bound "one push notification config" (a2a server) (docs/bounds.md).
func TestPushRefusesPrivateTargets(t *testing.T) {
	f := newPushFixture(t, a2a.Config{PushAllowedHosts: []string{"receiver.internal"}}, fastPush)
	c, _, _ := f.v1Client(t, f.srv.URL, a2a1.TransportProtocolJSONRPC)
	req := v1Message("x", map[string]any{a2a.ReceiverKey: "gated"})
	req.Config = &a2a1.SendMessageConfig{ReturnImmediately: true}
	task := v1Send(t, c, req)
	for _, u := range []string{"http://127.0.0.1:9/hook", "http://localhost/", "http://[::1]/", "http://169.254.169.254/latest/meta-data",
		"http://10.0.0.7/", "http://[::ffff:127.0.0.1]/", "http://100.100.100.200/"} {
		_, err := c.CreateTaskPushConfig(context.Background(), &a2a1.PushConfig{TaskID: task.ID, URL: u})
		if err == nil {
			t.Fatalf("%s: registered, want refused", u)
		}
		if !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "a2a.push_allowed_hosts") {
			t.Fatalf("%s: %v, want a refusal naming a2a.push_allowed_hosts", u, err)
		}
	}
	for _, bad := range []*a2a1.PushConfig{
		{TaskID: task.ID, URL: "ftp://example.com/"},
		{TaskID: task.ID, URL: "https://user:pw@example.com/"},
		{TaskID: task.ID, URL: "https://example.com/", Auth: &a2a1.PushAuthInfo{Credentials: "x"}},
		{TaskID: task.ID, URL: "https://example.com/", Auth: &a2a1.PushAuthInfo{Scheme: "Bearer", Credentials: "a\r\nX-Evil: 1"}},
		{TaskID: task.ID, URL: "https://example.com/", Auth: &a2a1.PushAuthInfo{Scheme: "Bearer", Credentials: "a\x01b"}},
		{TaskID: task.ID, URL: "https://example.com/", Auth: &a2a1.PushAuthInfo{Scheme: "Bear er", Credentials: "x"}},
		{TaskID: task.ID, URL: "https://example.com/", Token: "t\nX-Evil: 1"},
		{TaskID: task.ID, URL: "https://example.com/", ID: strings.Repeat("i", 200)},
		{TaskID: task.ID, URL: "https://example.com/", Auth: &a2a1.PushAuthInfo{Scheme: "Bearer", Credentials: strings.Repeat("c", 9000)}},
		{TaskID: task.ID, URL: "https://example.com/" + strings.Repeat("a", 3000)},
		{TaskID: "no-such-task", URL: "https://example.com/"},
	} {
		if _, err := c.CreateTaskPushConfig(context.Background(), bad); err == nil {
			t.Fatalf("%+v: registered, want an error", bad)
		}
	}
	close(f.release)
}

// Guards: bound "push notification configs per task" (a2a server) and
// bound "push notification configs in all" (a2a server) (docs/bounds.md).
func TestPushConfigBounds(t *testing.T) {
	f := newPushFixture(t, a2a.Config{MaxPushConfigsPerTask: 2, MaxPushConfigs: 3}, fastPush)
	defer close(f.release)
	c, _, _ := f.v1Client(t, f.srv.URL, a2a1.TransportProtocolJSONRPC)
	newTask := func() a2a1.TaskID {
		req := v1Message("x", map[string]any{a2a.ReceiverKey: "gated"})
		req.Config = &a2a1.SendMessageConfig{ReturnImmediately: true}
		return v1Send(t, c, req).ID
	}
	create := func(id a2a1.TaskID, cid string) error {
		_, err := c.CreateTaskPushConfig(context.Background(), &a2a1.PushConfig{TaskID: id, ID: cid, URL: "https://push.example.com/" + cid})
		return err
	}
	t1, t2 := newTask(), newTask()
	must(t, create(t1, "a"))
	must(t, create(t1, "b"))
	must(t, create(t1, "b")) // the same id replaces
	if err := create(t1, "c"); err == nil || !strings.Contains(err.Error(), "a2a.max_push_configs_per_task") {
		t.Fatalf("third config of a task: %v, want the per-task bound", err)
	}
	must(t, create(t2, "a"))
	if err := create(t2, "b"); err == nil || !strings.Contains(err.Error(), "a2a.max_push_configs") {
		t.Fatalf("fourth config in all: %v, want the bound in all", err)
	}
	must(t, c.DeleteTaskPushConfig(context.Background(), &a2a1.DeleteTaskPushConfigRequest{TaskID: t1, ID: "a"}))
	must(t, create(t2, "b")) // room again
}

// An a2a-go v0.3 client does the same through tasks/pushNotificationConfig/*:
// the receiver gets the Task object with the Authorization, token and
// signature.
func TestPush03(t *testing.T) {
	rc := newReceiver(t)
	f := newPushFixture(t, a2a.Config{PushAllowedHosts: []string{"127.0.0.1"}}, fastPush)
	c, card := f.a2aClient(t, f.srv.URL, nil)
	if !card.Capabilities.PushNotifications {
		t.Fatal("0.3 card: capabilities.pushNotifications false")
	}
	ctx := context.Background()
	params := userMessage("old", map[string]any{a2a.ReceiverKey: "gated"})
	no := false
	params.Config = &a2a03.MessageSendConfig{Blocking: &no}
	task := sendTask(t, c, params)

	set, err := c.SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: task.ID, Config: a2a03.PushConfig{ID: "p1",
		URL: rc.srv.URL, Token: pushToken, Auth: &a2a03.PushAuthInfo{Schemes: []string{"Bearer"}, Credentials: pushCred}}})
	if err != nil {
		t.Fatalf("SetTaskPushConfig: %v", err)
	}
	if set.Config.Auth == nil || set.Config.Auth.Credentials != "" {
		t.Fatalf("set answered %+v: want the credential left out", set.Config.Auth)
	}
	var first a2a03.Task
	must(t, json.Unmarshal(rc.next(t, "X-A2A-Notification-Token"), &first))
	if first.ID != task.ID || first.Status.State.Terminal() {
		t.Fatalf("first notification %+v", first)
	}
	got, err := c.GetTaskPushConfig(ctx, &a2a03.GetTaskPushConfigParams{TaskID: task.ID, ConfigID: "p1"})
	if err != nil || got.Config.URL != rc.srv.URL || got.Config.Auth.Credentials != "" {
		t.Fatalf("GetTaskPushConfig = %+v, %v", got, err)
	}
	list, err := c.ListTaskPushConfig(ctx, &a2a03.ListTaskPushConfigParams{TaskID: task.ID})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListTaskPushConfig = %+v, %v", list, err)
	}
	close(f.release)
	var final a2a03.Task
	must(t, json.Unmarshal(rc.next(t, "X-A2A-Notification-Token"), &final))
	if final.Status.State != a2a03.TaskStateCompleted || len(final.Artifacts) != 1 {
		t.Fatalf("final notification %+v", final)
	}
	must(t, c.DeleteTaskPushConfig(ctx, &a2a03.DeleteTaskPushConfigParams{TaskID: task.ID, ConfigID: "p1"}))
	if list, err := c.ListTaskPushConfig(ctx, &a2a03.ListTaskPushConfigParams{TaskID: task.ID}); err != nil || len(list) != 0 {
		t.Fatalf("after delete: %+v, %v", list, err)
	}
	if _, err := c.SetTaskPushConfig(ctx, &a2a03.TaskPushConfig{TaskID: task.ID, Config: a2a03.PushConfig{URL: "http://127.0.0.2/"}}); err == nil {
		t.Fatal("0.3 config at 127.0.0.2: registered, want refused")
	}
	_, out := post(t, f.fixture, "/a2a", `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"`+
		string(task.ID)+`","pushNotificationConfig":{"url":"http://127.0.0.2/"}}}`)
	if !strings.Contains(out, "-32602") || !strings.Contains(out, "loopback") || !strings.Contains(out, "a2a.push_allowed_hosts") {
		t.Fatalf("0.3 config at 127.0.0.2: %s, want a refusal naming a2a.push_allowed_hosts", out)
	}
}

// Without push delivery the methods answer -32003 and the cards say
// pushNotifications false, as before.
func TestPushDisabled(t *testing.T) {
	f := newPushFixture(t, a2a.Config{}, egress.Push{})
	defer close(f.release)
	_, card := f.a2aClient(t, f.srv.URL, nil)
	if card.Capabilities.PushNotifications {
		t.Fatal("card: pushNotifications true without push delivery")
	}
	status, out := post(t, f.fixture, "/a2a", `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"x","pushNotificationConfig":{"url":"https://e"}}}`)
	if status != http.StatusOK || !strings.Contains(out, "-32003") {
		t.Fatalf("set without push delivery: %d %s", status, out)
	}
}

// A push notification config belongs to the caller that registered it:
// another token that sees the task neither lists, reads nor deletes it
// (not found, as if it did not exist), and registering the same id makes
// a config of its own, leaving the first as it was; a token with scope
// admin sees and deletes them all. Both bindings, both clients' own ids.
func TestPushConfigsOwnedByTheirCaller(t *testing.T) {
	const aliceTok, bobTok, adminTok = "alice-token-0123456789", "bob-token-0123456789ab", "admin-token-0123456789"
	rw := []axocoatl.Scope{axocoatl.ScopeRead, axocoatl.ScopeExecute}
	for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			rc := newReceiver(t)
			f := newPushFixtureWith(t, a2a.Config{PushAllowedHosts: []string{"127.0.0.1"}}, fastPush, axocoatl.HTTPOptions{Tokens: []axocoatl.Token{
				{Name: "alice", Token: aliceTok, Scopes: rw}, {Name: "bob", Token: bobTok, Scopes: rw},
				{Name: "ops", Token: adminTok, Scopes: []axocoatl.Scope{axocoatl.ScopeAdmin}}}})
			base := f.client.Transport
			as := func(tok string) *v1client.Client {
				f.client.Transport = bearer{tok, base}
				defer func() { f.client.Transport = base }()
				c, _, _ := f.v1Client(t, f.srv.URL, binding)
				return c
			}
			alice, bob, admin := as(aliceTok), as(bobTok), as(adminTok)
			ctx := context.Background()
			// A send's own config is its sender's too.
			req := v1Message("hello", map[string]any{a2a.ReceiverKey: "gated"})
			req.Config = &a2a1.SendMessageConfig{ReturnImmediately: true, PushConfig: &a2a1.PushConfig{ID: "inline", URL: rc.srv.URL + "/alice-inline"}}
			task := v1Send(t, alice, req)
			defer close(f.release)
			if list, err := alice.ListTaskPushConfigs(ctx, &a2a1.ListTaskPushConfigRequest{TaskID: task.ID}); err != nil || len(list) != 1 || list[0].ID != "inline" {
				t.Fatalf("alice lists %+v, %v: want her send's config", list, err)
			}
			if _, err := alice.CreateTaskPushConfig(ctx, &a2a1.PushConfig{TaskID: task.ID, ID: "cfg1", URL: rc.srv.URL + "/alice"}); err != nil {
				t.Fatal(err)
			}
			// Bob sees the task (no agent globs) but not Alice's config.
			if _, err := bob.GetTask(ctx, &a2a1.GetTaskRequest{ID: task.ID}); err != nil {
				t.Fatalf("bob reads the task: %v", err)
			}
			if list, err := bob.ListTaskPushConfigs(ctx, &a2a1.ListTaskPushConfigRequest{TaskID: task.ID}); err != nil || len(list) != 0 {
				t.Fatalf("bob lists %+v, %v: want none", list, err)
			}
			if err := bob.DeleteTaskPushConfig(ctx, &a2a1.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "inline"}); err == nil {
				t.Fatal("bob deleted alice's send's config")
			}
			must(t, alice.DeleteTaskPushConfig(ctx, &a2a1.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "inline"}))
			if got, err := bob.GetTaskPushConfig(ctx, &a2a1.GetTaskPushConfigRequest{TaskID: task.ID, ID: "cfg1"}); err == nil {
				t.Fatalf("bob reads alice's config: %+v", got)
			}
			if err := bob.DeleteTaskPushConfig(ctx, &a2a1.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "cfg1"}); err == nil {
				t.Fatal("bob deleted alice's config")
			}
			// Bob's cfg1 is his own; Alice's stays.
			if _, err := bob.CreateTaskPushConfig(ctx, &a2a1.PushConfig{TaskID: task.ID, ID: "cfg1", URL: rc.srv.URL + "/bob"}); err != nil {
				t.Fatal(err)
			}
			if got, err := alice.GetTaskPushConfig(ctx, &a2a1.GetTaskPushConfigRequest{TaskID: task.ID, ID: "cfg1"}); err != nil || got.URL != rc.srv.URL+"/alice" {
				t.Fatalf("alice's config after bob's of the same id: %+v, %v", got, err)
			}
			if list, err := alice.ListTaskPushConfigs(ctx, &a2a1.ListTaskPushConfigRequest{TaskID: task.ID}); err != nil || len(list) != 1 || list[0].URL != rc.srv.URL+"/alice" {
				t.Fatalf("alice lists %+v, %v", list, err)
			}
			if list, err := admin.ListTaskPushConfigs(ctx, &a2a1.ListTaskPushConfigRequest{TaskID: task.ID}); err != nil || len(list) != 2 {
				t.Fatalf("admin lists %+v, %v: want both", list, err)
			}
			must(t, alice.DeleteTaskPushConfig(ctx, &a2a1.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "cfg1"}))
			if list, err := bob.ListTaskPushConfigs(ctx, &a2a1.ListTaskPushConfigRequest{TaskID: task.ID}); err != nil || len(list) != 1 || list[0].URL != rc.srv.URL+"/bob" {
				t.Fatalf("bob's config after alice deleted hers: %+v, %v", list, err)
			}
			must(t, admin.DeleteTaskPushConfig(ctx, &a2a1.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "cfg1"}))
			if list, err := bob.ListTaskPushConfigs(ctx, &a2a1.ListTaskPushConfigRequest{TaskID: task.ID}); err != nil || len(list) != 0 {
				t.Fatalf("after the admin's delete: %+v, %v", list, err)
			}
		})
	}
}

// A config's token authenticates the notifications to the client's
// receiver: a caller who may only read (it may not register configs)
// is never shown it, in Get and List, over both bindings. Configs belong
// to their registrant, so a reader gets none of another's (and were one
// shown, tokenShown would hide its token from a caller without execute).
func TestPushTokenNotShownToReaders(t *testing.T) {
	const readTok = "read-only-token-0123456789"
	rc := newReceiver(t)
	f := newPushFixtureWith(t, a2a.Config{PushAllowedHosts: []string{"127.0.0.1"}}, fastPush, axocoatl.HTTPOptions{
		APIToken: secret.Secret("executor-token-0123456789"),
		Tokens:   []axocoatl.Token{{Name: "reader", Token: secret.Secret(readTok), Scopes: []axocoatl.Scope{axocoatl.ScopeRead}}},
	})
	f.client.Transport = bearer{"executor-token-0123456789", f.client.Transport}
	c, _, _ := f.v1Client(t, f.srv.URL, a2a1.TransportProtocolJSONRPC)
	ctx := context.Background()
	req := v1Message("hello", map[string]any{a2a.ReceiverKey: "gated"})
	req.Config = &a2a1.SendMessageConfig{ReturnImmediately: true}
	task := v1Send(t, c, req)
	defer close(f.release)
	if _, err := c.CreateTaskPushConfig(ctx, &a2a1.PushConfig{TaskID: task.ID, ID: "cfg1", URL: rc.srv.URL + "/hook", Token: pushToken}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTaskPushConfig(ctx, &a2a1.GetTaskPushConfigRequest{TaskID: task.ID, ID: "cfg1"})
	if err != nil || got.Token != pushToken {
		t.Fatalf("the executor's GetTaskPushConfig = %+v, %v; want its token", got, err)
	}
	read := func(method, path, body string) string {
		t.Helper()
		r, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
		must(t, err)
		r.Header.Set("Authorization", "Bearer "+readTok)
		r.Header.Set("Content-Type", "application/json")
		if !strings.Contains(body, "tasks/") { // 0.3 methods go without it
			r.Header.Set("A2A-Version", "1.0")
		}
		resp, err := http.DefaultClient.Do(r)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 500 || strings.Contains(string(b), rc.srv.URL+"/hook") {
			t.Errorf("%s %s: a reader was shown the executor's config: %d %s", method, path, resp.StatusCode, b)
		}
		return string(b)
	}
	for _, b := range []string{
		read("GET", "/a2a/tasks/"+string(task.ID)+"/pushNotificationConfigs/cfg1", ""),
		read("GET", "/a2a/tasks/"+string(task.ID)+"/pushNotificationConfigs", ""),
		read("POST", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"GetTaskPushNotificationConfig","params":{"taskId":"`+string(task.ID)+`","id":"cfg1"}}`),
		read("POST", "/a2a", `{"jsonrpc":"2.0","id":2,"method":"ListTaskPushNotificationConfigs","params":{"taskId":"`+string(task.ID)+`"}}`),
		read("POST", "/a2a", `{"jsonrpc":"2.0","id":3,"method":"tasks/pushNotificationConfig/list","params":{"id":"`+string(task.ID)+`"}}`),
	} {
		if strings.Contains(b, pushToken) {
			t.Errorf("a reader was shown the push token: %s", b)
		}
	}
}
