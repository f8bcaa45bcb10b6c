package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/mcpclient"
)

// bookSchema is the form the asker server requests: every primitive the
// spec allows, with defaults.
const bookSchema = `{"type":"object","properties":{
 "name":{"type":"string","title":"Traveller","minLength":2,"maxLength":40},
 "seats":{"type":"integer","title":"Seats","minimum":1,"maximum":9,"default":1},
 "class":{"type":"string","title":"Class","enum":["economy","business"],"default":"economy"},
 "meal":{"type":"string","oneOf":[{"const":"veg","title":"Vegetarian"},{"const":"any","title":"Anything"}]},
 "insured":{"type":"boolean","default":false}},
 "required":["name"]}`

// askerServer is a go-sdk MCP server whose tool book asks the user who
// travels, the 2026-07-28 way (an InputRequiredResult with a form
// elicitation and a requestState; for a 2025-11-25 client the go-sdk's
// server turns that into an elicitation/create request during the call).
type askerServer struct {
	srv *mcp.Server
	mu  sync.Mutex
	got []*mcp.ElicitResult // the answers the tool received
}

func newAskerServer(versions ...string) *askerServer {
	a := &askerServer{srv: mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})}
	mcp.AddTool(a.srv, &mcp.Tool{Name: "book", Description: "Books a trip."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			resp, ok := req.Params.InputResponses["who"]
			if !ok {
				return &mcp.CallToolResult{
					InputRequests: mcp.InputRequestMap{"who": &mcp.ElicitParams{Message: "Who travels?", RequestedSchema: json.RawMessage(bookSchema)}},
					RequestState:  "trip-1",
				}, nil, nil
			}
			er, _ := resp.(*mcp.ElicitResult)
			if er == nil || (!strings.HasPrefix(req.Params.RequestState, "trip-1") && req.Params.RequestState != "") {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "bad retry"}}}, nil, nil
			}
			a.mu.Lock()
			a.got = append(a.got, er)
			a.mu.Unlock()
			if er.Action != "accept" {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "not booked: " + er.Action}}}, nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("booked for %v: %v seats, %v", er.Content["name"], er.Content["seats"], er.Content["class"])}}}, nil, nil
		})
	return a
}

func (a *askerServer) answers() []*mcp.ElicitResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*mcp.ElicitResult(nil), a.got...)
}

func (a *askerServer) dial(ctx context.Context) (mcp.Transport, error) {
	ct, st := mcp.NewInMemoryTransports()
	if _, err := a.srv.Connect(ctx, st, nil); err != nil {
		return nil, err
	}
	return ct, nil
}

func (a *askerServer) attach(t testing.TB, e *axocoatl.Engine) *mcpclient.Module {
	t.Helper()
	mc, err := mcpclient.New(mcpclient.Config{Servers: []mcpclient.ServerConfig{{Name: "asker", Dial: a.dial}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Use(context.Background(), mc); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mc.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	return mc
}

// eras are the two ways a server asks: the server's protocol versions.
var eras = []struct {
	name     string
	versions []string
	want     string
}{
	{"2026-07-28", nil, "2026-07-28"},
	{"2025-11-25", []string{"2025-11-25"}, "2025-11-25"},
}

// A go-sdk server asks during a tool call, in both eras: the question is
// pending in the approvals table (kind question, the schema, the server,
// the tool, the agent); an answer that does not match the schema is
// refused and loses nothing; a valid one reaches the server with the
// schema's defaults filled in, and the run completes.
func TestQuestionFromMCPServer(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			v := newEnv(t, approval.Config{Default: approval.Allow}, axocoatl.Options{})
			peer := newOpenAIPeer(t)
			if err := v.e.AddAgent(agent.Spec{ID: "travel", Provider: "openai"}, peer.model(t)); err != nil {
				t.Fatal(err)
			}
			a := newAskerServer(era.versions...)
			mc := a.attach(t, v.e)
			if got := mc.Status()[0].ProtocolVersion; got != era.want {
				t.Fatalf("negotiated %s, want %s", got, era.want)
			}
			done := make(chan string, 1)
			go func() {
				res, err := v.e.Execute(context.Background(), "travel", ask("mcp__asker__book", `{}`))
				if err != nil {
					done <- "error: " + err.Error()
					return
				}
				done <- res.Output
			}()
			q := v.next(t, approval.EventRequested)
			if q["kind"] != "question" || q["server"] != "asker" || q["tool"] != "mcp__asker__book" || q["agent_id"] != "travel" || q["message"] != "Who travels?" {
				t.Fatalf("requested %v: want a question from asker during mcp__asker__book of travel", q)
			}
			schema, _ := json.Marshal(q["schema"])
			if !strings.Contains(string(schema), `"minLength":2`) {
				t.Fatalf("schema %s, want the requested one", schema)
			}
			id := q["approval_id"].(string)
			list := v.do(t, "GET", "/api/approvals", "")
			if !strings.Contains(list.raw, `"kind":"question"`) || !strings.Contains(list.raw, id) {
				t.Fatalf("GET /api/approvals: %s", list.raw)
			}

			for _, bad := range []struct{ body, want string }{
				{`{"decision":"allow","content":{"name":"A"}}`, "at least 2"},
				{`{"decision":"allow","content":{}}`, `"name" is required`},
				{`{"decision":"allow","content":{"name":"Ada","seats":2.5}}`, "integer"},
				{`{"decision":"allow","content":{"name":"Ada","seats":10}}`, "at most 9"},
				{`{"decision":"allow","content":{"name":"Ada","class":"first"}}`, "allowed values"},
				{`{"decision":"allow","content":{"name":"Ada","meal":"fish"}}`, "allowed values"},
				{`{"decision":"allow","content":{"name":"Ada","insured":"yes"}}`, "true or false"},
				{`{"decision":"allow","content":{"name":"Ada","extra":1}}`, `unknown property "extra"`},
				{`{"decision":"allow","content":"Ada"}`, `"content" must be an object`},
				{`{"decision":"allow","remember":"always","content":{"name":"Ada"}}`, "answered once"},
			} {
				r := v.do(t, "POST", "/api/approvals/"+id, bad.body)
				msg, _ := r.body["error"].(map[string]any)["message"].(string)
				if r.status != 400 || !strings.Contains(msg, bad.want) {
					t.Errorf("POST %s: %d %s, want 400 saying %q", bad.body, r.status, r.raw, bad.want)
				}
			}
			if n := len(a.answers()); n != 0 {
				t.Fatalf("the server got %d answers before a valid one", n)
			}
			r := v.do(t, "POST", "/api/approvals/"+id, `{"decision":"allow","content":{"name":"Ada","seats":2,"meal":"veg"}}`)
			if r.status != 200 || r.body["kind"] != "question" || r.body["status"] != "approved" || strings.Contains(r.raw, "Ada") {
				t.Fatalf("answer: %d %s (want approved, the answer not echoed)", r.status, r.raw)
			}
			select {
			case out := <-done:
				if !strings.Contains(out, "booked for Ada: 2 seats, economy") {
					t.Fatalf("run: %s", out)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("run not done 30s after the answer")
			}
			got := a.answers()
			if len(got) != 1 || got[0].Action != "accept" || got[0].Content["insured"] != false || got[0].Content["meal"] != "veg" {
				t.Fatalf("server got %+v", got)
			}
		})
	}
}

// No answer within approval.timeout: the server is told decline, the run
// goes on.
func TestQuestionTimeoutDeclines(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			v := newEnv(t, approval.Config{Default: approval.Allow, Timeout: 300 * time.Millisecond}, axocoatl.Options{})
			peer := newOpenAIPeer(t)
			if err := v.e.AddAgent(agent.Spec{ID: "travel", Provider: "openai"}, peer.model(t)); err != nil {
				t.Fatal(err)
			}
			a := newAskerServer(era.versions...)
			a.attach(t, v.e)
			res, err := v.e.Execute(context.Background(), "travel", ask("mcp__asker__book", `{}`))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Output, "not booked: decline") {
				t.Fatalf("run: %s", res.Output)
			}
			r := v.next(t, approval.EventResolved)
			if r["kind"] != "question" || r["status"] != "expired" || r["resolved_by"] != "timeout" {
				t.Fatalf("resolved %v", r)
			}
		})
	}
}

// Guards: bound "a question put again to a door" (approval) (docs/bounds.md).
// The run's door is asked too (its UserPrompter gets the schema, no
// approval); its answer is checked like any other and reaches the server.
func TestQuestionThroughDoor(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			v := newEnv(t, approval.Config{Default: approval.Allow}, axocoatl.Options{})
			peer := newOpenAIPeer(t)
			if err := v.e.AddAgent(agent.Spec{ID: "travel", Provider: "openai"}, peer.model(t)); err != nil {
				t.Fatal(err)
			}
			a := newAskerServer(era.versions...)
			a.attach(t, v.e)
			var mu sync.Mutex
			var prompts []axocoatl.UserPrompt
			door := axocoatl.UserPrompterFunc(func(_ context.Context, p axocoatl.UserPrompt) (axocoatl.UserAnswer, error) {
				mu.Lock()
				prompts = append(prompts, p)
				n := len(prompts)
				mu.Unlock()
				if n == 1 { // a first answer that does not match: not taken
					return axocoatl.UserAnswer{Accepted: true, Content: map[string]any{"seats": 3.0}, By: "door"}, nil
				}
				return axocoatl.UserAnswer{Accepted: true, Content: map[string]any{"name": "Grace", "seats": 3.0}, By: "door"}, nil
			})
			ctx := axocoatl.WithUserPrompter(context.Background(), door)
			done := make(chan string, 1)
			go func() {
				res, err := v.e.Execute(ctx, "travel", ask("mcp__asker__book", `{}`))
				if err != nil {
					done <- err.Error()
					return
				}
				done <- res.Output
			}()
			// The first (invalid) answer is not taken: the door is asked
			// again, told why (a door that calls the prompt's Check refuses
			// it itself).
			out := <-done
			if !strings.Contains(out, "booked for Grace: 3 seats") {
				t.Fatalf("run: %s", out)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(prompts) != 2 {
				t.Fatalf("the door was asked %d times, want 2", len(prompts))
			}
			for _, p := range prompts {
				if p.Approval != nil || !strings.Contains(string(p.Schema), `"seats"`) || !strings.Contains(p.Message, "asker") || !strings.Contains(p.Message, "Who travels?") || p.Check == nil {
					t.Fatalf("prompt %+v", p)
				}
			}
			if m := prompts[1].Message; !strings.HasPrefix(m, "Your answer was refused (") || !strings.Contains(m, `"name" is required`) {
				t.Fatalf("the second prompt does not say why: %q", m)
			}
			// The prompt's Check is the question's own.
			if _, err := prompts[0].Check(map[string]any{"name": "G"}); !errors.Is(err, approval.ErrBadAnswer) {
				t.Fatalf("Check of a too short name: %v", err)
			}
			if c, err := prompts[0].Check(map[string]any{"name": "Grace"}); err != nil || c["seats"] != 1.0 || c["class"] != "economy" {
				t.Fatalf("Check of a good answer: %v %v", c, err)
			}
		})
	}
}

// Guards: bound "pending questions per server" (approval) (docs/bounds.md).
// Guards: bound "a question's requested schema" (approval) (docs/bounds.md).
// Guards: bound "a question's answer" (approval) (docs/bounds.md).
func TestQuestionBounds(t *testing.T) {
	v := newEnv(t, approval.Config{}, axocoatl.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := axocoatl.Question{Server: "s", Message: "m", Schema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range approval.MaxQuestionsPerServer {
		wg.Go(func() { _, _ = v.m.AskQuestion(ctx, q) })
	}
	eventually(t, "the questions pending", func() bool { return len(v.m.Pending()) == approval.MaxQuestionsPerServer })
	if _, err := v.m.AskQuestion(ctx, q); !errors.Is(err, approval.ErrTooManyQuestions) {
		t.Fatalf("one question over the bound: %v, want ErrTooManyQuestions", err)
	}
	other := q
	other.Server = "t"
	wg.Go(func() { _, _ = v.m.AskQuestion(ctx, other) })
	eventually(t, "another server's question", func() bool { return len(v.m.Pending()) == approval.MaxQuestionsPerServer+1 })

	big := axocoatl.Question{Server: "u", Schema: json.RawMessage(`{"type":"object","description":"` + strings.Repeat("x", approval.MaxQuestionSchemaBytes) + `"}`)}
	if _, err := v.m.AskQuestion(ctx, big); !errors.Is(err, approval.ErrBadSchema) {
		t.Fatalf("schema over the bound: %v, want ErrBadSchema", err)
	}
	var many strings.Builder
	for i := range approval.MaxQuestionProperties + 1 {
		fmt.Fprintf(&many, `,"p%d":{"type":"string"}`, i)
	}
	for _, s := range []string{
		`{"type":"object","properties":{` + many.String()[1:] + `}}`,
		`{"type":"object","properties":{"a":{"type":"object"}}}`,
		`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}}}`,
		`{"type":"array"}`,
		`{"type":"object","required":["nope"]}`,
		`[1]`,
	} {
		if _, err := v.m.AskQuestion(ctx, axocoatl.Question{Server: "u", Schema: json.RawMessage(s)}); !errors.Is(err, approval.ErrBadSchema) {
			t.Errorf("schema %s: %v, want ErrBadSchema", s, err)
		}
	}

	id := v.m.Pending()[0].ApprovalID
	huge := map[string]any{"x": strings.Repeat("y", approval.MaxAnswerBytes)}
	if _, err := v.m.Answer(ctx, id, approval.Allow, huge, "test"); !errors.Is(err, approval.ErrBadAnswer) {
		t.Fatalf("answer over the bound: %v, want ErrBadAnswer", err)
	}
	body, _ := json.Marshal(map[string]any{"decision": "allow", "content": huge})
	if r := v.do(t, "POST", "/api/approvals/"+id, string(body)); r.status != 400 {
		t.Fatalf("HTTP answer over the bound: %d %s", r.status, r.raw)
	}
	if _, err := v.m.Answer(ctx, id, approval.Allow, map[string]any{"x": "ok"}, "test"); err != nil {
		t.Fatalf("the question was lost after the refused answers: %v", err)
	}
}

// Guards: bound "pending questions per server" (approval) (docs/bounds.md).
//
// Which call asks: a 2025-11-25 elicitation/create names no call, so with
// two calls of the server in flight the question is the server's alone (no
// tool); with one it is that call's. A server that floods questions gets
// MaxQuestionsPerServer pending and the rest declined at once.
func TestQuestionAttributionAndFlood(t *testing.T) {
	v := newEnv(t, approval.Config{Default: approval.Allow}, axocoatl.Options{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "old", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	var declined atomic.Int64
	mcp.AddTool(srv, &mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "waited"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		N int `json:"n"`
	}) (*mcp.CallToolResult, any, error) {
		var mu sync.Mutex
		counts := map[string]int{}
		var wg sync.WaitGroup
		for range max(in.N, 1) {
			wg.Go(func() {
				res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "ok?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean","default":true}}}`)})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					counts["error"]++
					return
				}
				counts[res.Action]++
				if res.Action == "decline" {
					declined.Add(1)
				}
			})
		}
		wg.Wait()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("accept=%d decline=%d error=%d", counts["accept"], counts["decline"], counts["error"])}}}, nil, nil
	})
	dial := func(ctx context.Context) (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(ctx, st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
	mc, err := mcpclient.New(mcpclient.Config{Servers: []mcpclient.ServerConfig{{Name: "old", Dial: dial}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.e.Use(context.Background(), mc); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mc.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	call := func(tool, args string) chan string {
		out := make(chan string, 1)
		go func() {
			res, err := v.e.CallTool(ctx, axocoatl.ToolCall{Tool: tool, Arguments: json.RawMessage(args)})
			if err != nil {
				out <- err.Error()
				return
			}
			out <- res.Content
		}()
		return out
	}

	// One call in flight: the question is that call's.
	one := call("mcp__old__ask", `{"n":1}`)
	q := v.next(t, approval.EventRequested)
	if q["tool"] != "mcp__old__ask" {
		t.Fatalf("with one call in flight, question %v: want tool mcp__old__ask", q)
	}
	if _, err := v.m.Answer(ctx, q["approval_id"].(string), approval.Allow, nil, "test"); err != nil {
		t.Fatal(err)
	}
	if got := <-one; got != "accept=1 decline=0 error=0" {
		t.Fatalf("one: %s", got)
	}

	// Two in flight: the server's alone.
	waiting := call("mcp__old__wait", `{}`)
	<-entered
	two := call("mcp__old__ask", `{"n":1}`)
	q = v.next(t, approval.EventRequested)
	if q["tool"] != "" || q["server"] != "old" {
		t.Fatalf("with two calls in flight, question %v: want the server alone", q)
	}
	if _, err := v.m.Answer(ctx, q["approval_id"].(string), approval.Deny, nil, "test"); err != nil {
		t.Fatal(err)
	}
	if got := <-two; got != "accept=0 decline=1 error=0" {
		t.Fatalf("two: %s", got)
	}
	close(release)
	<-waiting

	// A flood: the bound's worth pending, the rest declined at once.
	declined.Store(0)
	flood := call("mcp__old__ask", `{"n":10}`)
	eventually(t, "the rest declined", func() bool { return declined.Load() == 10-approval.MaxQuestionsPerServer })
	if n := len(v.m.Pending()); n != approval.MaxQuestionsPerServer {
		t.Fatalf("%d pending, want %d", n, approval.MaxQuestionsPerServer)
	}
	for _, p := range v.m.Pending() {
		if _, err := v.m.Answer(ctx, p.ApprovalID, approval.Allow, map[string]any{"ok": false}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	want := fmt.Sprintf("accept=%d decline=%d error=0", approval.MaxQuestionsPerServer, 10-approval.MaxQuestionsPerServer)
	if got := <-flood; got != want {
		t.Fatalf("flood: %s, want %s", got, want)
	}
}

// Guards: bound "a question's message" (approval) (docs/bounds.md).
func TestQuestionMessageCut(t *testing.T) {
	v := newEnv(t, approval.Config{Timeout: 50 * time.Millisecond}, axocoatl.Options{})
	msg := strings.Repeat("é", approval.MaxQuestionMessage) // 2 bytes each
	ans, err := v.m.AskQuestion(context.Background(), axocoatl.Question{Server: "s", Message: msg})
	if err != nil || ans.Accepted {
		t.Fatalf("unanswered question: %+v, %v; want declined", ans, err)
	}
	q := v.next(t, approval.EventRequested)
	got, _ := q["message"].(string)
	if len(got) > approval.MaxQuestionMessage || !utf8.ValidString(got) || !strings.HasPrefix(msg, got) || len(got) < approval.MaxQuestionMessage-1 {
		t.Fatalf("message of %d bytes kept as %d bytes (valid UTF-8 %v)", len(msg), len(got), utf8.ValidString(got))
	}
}

// A question no call can be tied to (a 2025-11-25 server asks between
// calls) is withdrawn when the MCP client stops: Stop does not wait for
// the human.
func TestQuestionWithdrawnWhenClientStops(t *testing.T) {
	v := newEnv(t, approval.Config{Default: approval.Allow}, axocoatl.Options{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "late", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	kick, asked := make(chan struct{}), make(chan error, 1)
	mcp.AddTool(srv, &mcp.Tool{Name: "kick"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		ss := req.Session
		go func() {
			<-kick
			_, err := ss.Elicit(context.Background(), &mcp.ElicitParams{Message: "still there?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{}}`)})
			asked <- err
		}()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "kicked"}}}, nil, nil
	})
	dial := func(ctx context.Context) (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(ctx, st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
	mc, err := mcpclient.New(mcpclient.Config{Servers: []mcpclient.ServerConfig{{Name: "late", Dial: dial}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.e.Use(context.Background(), mc); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := mc.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := v.e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__late__kick", Arguments: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	close(kick)
	q := v.next(t, approval.EventRequested)
	if q["tool"] != "" || q["server"] != "late" {
		t.Fatalf("question %v: want the server's alone", q)
	}
	start := time.Now()
	if err := mc.Stop(ctx); err != nil {
		t.Fatalf("stop with a question pending: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("stop took %s", took)
	}
	r := v.next(t, approval.EventResolved)
	if r["status"] != "withdrawn" {
		t.Fatalf("resolved %v, want withdrawn", r)
	}
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("the server's elicitation never ended")
	}
}

// Guards: bound "a question put again to a door" (approval) (docs/bounds.md).
// A door that never checks and always answers badly is asked 3 times in
// all; the question then stays pending, and another channel answers it.
func TestQuestionDoorRetriesBounded(t *testing.T) {
	v := newEnv(t, approval.Config{}, axocoatl.Options{})
	var mu sync.Mutex
	tries := 0
	door := axocoatl.UserPrompterFunc(func(context.Context, axocoatl.UserPrompt) (axocoatl.UserAnswer, error) {
		mu.Lock()
		tries++
		mu.Unlock()
		return axocoatl.UserAnswer{Accepted: true, Content: map[string]any{"x": 5.0}}, nil
	})
	ctx := axocoatl.WithUserPrompter(context.Background(), door)
	got := make(chan axocoatl.UserAnswer, 1)
	go func() {
		ans, _ := v.m.AskQuestion(ctx, axocoatl.Question{Server: "s", Message: "m", Schema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)})
		got <- ans
	}()
	q := v.next(t, approval.EventRequested)
	eventually(t, "three tries", func() bool { mu.Lock(); defer mu.Unlock(); return tries == 3 })
	if len(v.m.Pending()) != 1 {
		t.Fatalf("pending %d, want the question still pending", len(v.m.Pending()))
	}
	if r := v.do(t, "POST", "/api/approvals/"+q["approval_id"].(string), `{"decision":"allow","content":{"x":"five"}}`); r.status != 200 {
		t.Fatalf("answer: %d %s", r.status, r.raw)
	}
	if ans := <-got; !ans.Accepted || ans.Content["x"] != "five" {
		t.Fatalf("answer %+v", ans)
	}
	mu.Lock()
	defer mu.Unlock()
	if tries != 3 {
		t.Fatalf("the door was asked %d times, want 3", tries)
	}
}
