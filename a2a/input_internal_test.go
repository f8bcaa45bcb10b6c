package a2a

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// The caller is the credential, however it is sent, and only its digest.
func TestCallerOf(t *testing.T) {
	req := func(h, v string) string {
		r := httptest.NewRequest("POST", "/a2a", nil)
		if h != "" {
			r.Header.Set(h, v)
		}
		return callerOf(r)
	}
	const tok = "s3cret-token-0123456789"
	bearer, key := req("Authorization", "Bearer "+tok), req("X-API-Key", tok)
	if bearer == "" || bearer != key {
		t.Fatalf("one token by Bearer %q and X-API-Key %q: want one caller", bearer, key)
	}
	if strings.Contains(bearer, tok) || strings.Contains(bearer, "s3cret") {
		t.Fatalf("caller %q holds the credential", bearer)
	}
	if other := req("Authorization", "Bearer other-token-0123456789"); other == bearer {
		t.Fatal("two tokens are one caller")
	}
	basicA, basicB := req("Authorization", "Basic YTpi"), req("Authorization", "Basic YzpK")
	if basicA == "" || basicA == basicB {
		t.Fatalf("two Basic credentials: %q, %q", basicA, basicB)
	}
	if anon := req("", ""); anon != "" {
		t.Fatalf("no credential: %q", anon)
	}
}

// Prompts of one run queue: the task shows the oldest; an answer takes it
// and the next is shown; a withdrawn one (its gate done) leaves, and with
// none left the task is working again.
func TestPromptQueue(t *testing.T) {
	tk := newTask("t1", "c1", "a", storedMessage{v03: &a2a03.Message{}}, "", func() {})
	tk.setWorking()
	var pr axocoatl.UserPrompter = tk
	type result struct {
		a   axocoatl.UserAnswer
		err error
	}
	ask := func(ctx context.Context, tool string) chan result {
		c := make(chan result, 1)
		go func() {
			a, err := pr.PromptUser(ctx, axocoatl.UserPrompt{Message: tool, Approval: &axocoatl.PromptedApproval{Tool: tool, AgentID: "a"}})
			c <- result{a, err}
		}()
		return c
	}
	shows := func(tool string) *inputPrompt {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for {
			if v, ok := tk.settled(ctx); !ok || ctx.Err() != nil {
				t.Fatalf("the task does not show %s", tool)
			} else if v.prompt != nil && v.prompt.p.Approval.Tool == tool {
				return v.prompt
			}
			time.Sleep(time.Millisecond)
		}
	}
	first := ask(context.Background(), "one")
	q1 := shows("one")
	ctx2, withdraw := context.WithCancel(context.Background())
	second := ask(ctx2, "two")
	for deadline := time.Now().Add(10 * time.Second); len(tk.prompts2()) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second prompt was not queued")
		}
	}
	if tk.head() != q1 {
		t.Fatal("the second prompt displaced the first")
	}
	if !tk.take(q1, axocoatl.UserAnswer{Accepted: true}) || tk.take(q1, axocoatl.UserAnswer{}) {
		t.Fatal("take: want one answer per prompt")
	}
	if r := <-first; r.err != nil || !r.a.Accepted {
		t.Fatalf("first answer %+v", r)
	}
	shows("two")
	withdraw()
	if r := <-second; r.err == nil {
		t.Fatal("a withdrawn prompt answered")
	}
	if v := tk.view(); v.state != a2a03.TaskStateWorking || v.prompt != nil {
		t.Fatalf("after the last prompt left: %s %v", v.state, v.prompt)
	}
	tk.finish(a2a03.TaskStateCanceled, "", "canceled")
	if _, err := pr.PromptUser(context.Background(), axocoatl.UserPrompt{Message: "late"}); err != ErrTaskEnded {
		t.Fatalf("prompt on an ended task: %v", err)
	}
}

func (t *task) prompts2() []*inputPrompt {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*inputPrompt(nil), t.prompts...)
}

// Hostile or malformed answers are refused saying how to answer; none is
// taken for a verdict it is not.
func TestParseAnswer(t *testing.T) {
	tk := newTask("t1", "c1", "a", storedMessage{v03: &a2a03.Message{}}, "", func() {})
	approvalQ, err := newPrompt(tk, axocoatl.UserPrompt{Message: "m", Approval: &axocoatl.PromptedApproval{Tool: "w"}})
	if err != nil {
		t.Fatal(err)
	}
	question, err := newPrompt(tk, axocoatl.UserPrompt{Message: "q", Schema: []byte(`{"type":"object","properties":{"city":{"type":"string"},"n":{"type":"integer"}},"required":["city"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	msg := func(parts ...a2a03.Part) *sendRequest {
		return &sendRequest{msg03: &a2a03.Message{Parts: parts}}
	}
	data := func(d map[string]any) a2a03.Part { return a2a03.DataPart{Data: d} }
	text := func(s string) a2a03.Part { return a2a03.TextPart{Text: s} }
	for _, tc := range []struct {
		name     string
		q        *inputPrompt
		sr       *sendRequest
		accepted bool
		remember string
		err      string
	}{
		{"allow text", approvalQ, msg(text(" ALLOW\n")), true, "once", ""},
		{"deny text", approvalQ, msg(text("deny")), false, "once", ""},
		{"allow always", approvalQ, msg(data(map[string]any{"approval": "allow", "remember": "always"})), true, "always", ""},
		{"deny data", approvalQ, msg(data(map[string]any{"approval": "deny"})), false, "once", ""},
		{"yes", approvalQ, msg(text("yes please")), false, "", "no answer to an approval"},
		{"number", approvalQ, msg(data(map[string]any{"approval": 1})), false, "", "approval is 1"},
		{"missing", approvalQ, msg(data(map[string]any{"remember": "always"})), false, "", "approval is missing"},
		{"bad remember", approvalQ, msg(data(map[string]any{"approval": "allow", "remember": "forever"})), false, "", "remember is"},
		{"unknown key", approvalQ, msg(data(map[string]any{"approval": "allow", "sudo": true})), false, "", "unknown key"},
		{"two parts", approvalQ, msg(text("allow"), text("deny")), false, "", "one part"},
		{"file", approvalQ, msg(a2a03.FilePart{File: a2a03.FileURI{URI: "x"}}), false, "", "text or a data part"},
		{"values", question, msg(data(map[string]any{"city": "Oaxaca", "n": 2.0})), true, "", ""},
		{"decline", question, msg(text("decline")), false, "", ""},
		{"required", question, msg(data(map[string]any{"n": 2.0})), false, "", "schema"},
		{"wrong type", question, msg(data(map[string]any{"city": 3.0})), false, "", "schema"},
		{"extra", question, msg(data(map[string]any{"city": "x", "admin": true})), false, "", "not a property"},
		{"nested", question, msg(data(map[string]any{"city": map[string]any{"a": 1.0}})), false, "", "not a string, number"},
		{"question text", question, msg(text("Oaxaca")), false, "", "no answer to a question"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := parseAnswer(tc.q, tc.sr)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || a.Accepted != tc.accepted || a.Remember != tc.remember || a.By != InputBy {
				t.Fatalf("%+v, %v", a, err)
			}
		})
	}
}

// An answer of any shape never panics, and an approval is only allowed by
// the text allow or a data part whose approval is "allow".
func FuzzParseAnswer(f *testing.F) {
	f.Add(`{"approval":"allow","remember":"always"}`, "allow")
	f.Add(`{"approval":["allow"]}`, "ALLOW")
	f.Add(`{"city":{"x":1}}`, "decline")
	tk := newTask("t1", "c1", "a", storedMessage{v03: &a2a03.Message{}}, "", func() {})
	approvalQ, _ := newPrompt(tk, axocoatl.UserPrompt{Message: "m", Approval: &axocoatl.PromptedApproval{Tool: "w"}})
	question, _ := newPrompt(tk, axocoatl.UserPrompt{Message: "q", Schema: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)})
	f.Fuzz(func(t *testing.T, data, text string) {
		var d map[string]any
		parts := a2a03.ContentParts{a2a03.TextPart{Text: text}}
		if json.Unmarshal([]byte(data), &d) == nil && d != nil {
			parts = append(parts, a2a03.DataPart{Data: d})
		}
		for _, ps := range []a2a03.ContentParts{parts, parts[:1], parts[1:]} {
			sr := &sendRequest{msg03: &a2a03.Message{Parts: ps}}
			if a, err := parseAnswer(approvalQ, sr); err == nil && a.Accepted {
				_, isText := ps[0].(a2a03.TextPart)
				allowText := len(ps) == 1 && isText && strings.EqualFold(strings.TrimSpace(text), "allow")
				allowData := d != nil && d["approval"] == "allow"
				if !allowText && !allowData {
					t.Fatalf("accepted %v from %q / %q", a, data, text)
				}
			}
			_, _ = parseAnswer(question, sr)
		}
	})
}
