package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/a2a"
)

// An answer is never a large multiple of its request: an object input
// nested 5,000 deep (25 KB) would be 50 MB indented for the model; it
// gets a 400 naming the limit, in a small answer, while an ordinary object
// is still rendered indented.
func TestDeepObjectInputBounded(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	deep := strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)
	status, out := post(t, f, "/a2a/tasks", `{"receiver_id":"assistant","input":`+deep+`}`)
	if status != http.StatusBadRequest || !strings.Contains(out, "bytes (4× its size + 64 KiB)") || len(out) > 1024 {
		t.Fatalf("deep object: %d, %d bytes: %.300s", status, len(out), out)
	}
	status, out = post(t, f, "/a2a/tasks", `{"receiver_id":"assistant","input":{"city":"Oaxaca","days":[1,2]}}`)
	var res struct {
		Output struct{ Content string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || status != http.StatusOK || res.Output.Content != "{\n  \"city\": \"Oaxaca\",\n  \"days\": [\n    1,\n    2\n  ]\n}" {
		t.Fatalf("ordinary object: %d %s", status, out)
	}
}

// A client may choose the id of its /a2a/tasks task, but not the id of a
// task that is running: the second gets 409 task_exists and starts
// nothing (one run per task id; its events, answer and followers stay the
// first's), and once the first ended the id is free again.
func TestLegacyTaskIDInUse(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	// The first runs (the slow agent answers never) until its client
	// goes, after the second was answered, however loaded the machine.
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	first := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/a2a/tasks", strings.NewReader(`{"id":"mine","receiver_id":"slow","input":"wait"}`))
		if err == nil {
			var resp *http.Response
			if resp, err = f.client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		first <- err
	}()
	<-f.started
	status, out := post(t, f, "/a2a/tasks", `{"id":"mine","receiver_id":"assistant","input":"intrude"}`)
	if status != http.StatusConflict || !strings.Contains(out, "task_exists") {
		t.Fatalf("a second task under a running id: %d %s, want 409 task_exists", status, out)
	}
	hangUp()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first task ended before its client went: %v", err)
	}
	// The run ends with its client's request; the id is free once it has.
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, out = post(t, f, "/a2a/tasks", `{"id":"mine","receiver_id":"assistant","input":"again"}`)
		if status != http.StatusConflict || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if status != http.StatusOK || !strings.Contains(out, `"task_id":"mine"`) || !strings.Contains(out, "again") {
		t.Fatalf("the id once free: %d %s", status, out)
	}
}
