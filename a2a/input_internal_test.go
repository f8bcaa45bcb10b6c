package a2a

import (
	"context"
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
	pr := (&Handler{}).prompter(tk)
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
