package a2a_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/axocoatl/axocoatl-go/a2a"
)

// Guards: bound a2a.max_background_tasks (docs/bounds.md, A2A server). With
// the bound at 2, two non-blocking sends on the slow agent are accepted (an
// A2A 0.3 configuration.blocking false from the a2a-go client, an A2A 1.0
// returnImmediately from the a2a-go/v2 client); a third of either
// generation is refused with -32000 naming the bound, while a blocking send
// still runs (the bound is of detached runs, not of requests). Once one of
// the two is canceled and its run has ended, a non-blocking send is
// accepted again.
func TestMaxBackgroundTasks(t *testing.T) {
	f := newFixture(t, a2a.Config{MaxBackgroundTasks: 2})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pc, _ := f.a2aClient(t, f.srv.URL, &a2aclient.Config{Polling: true})
	vc, _, _ := f.v1Client(t, f.srv.URL, a2a1.TransportProtocolJSONRPC)

	send03 := func() (*a2a03.Task, error) {
		no := false
		p := userMessage("wait", map[string]any{"receiver_id": "slow"})
		p.Config = &a2a03.MessageSendConfig{Blocking: &no}
		res, err := pc.SendMessage(ctx, p)
		if err != nil {
			return nil, err
		}
		return res.(*a2a03.Task), nil
	}
	send10 := func() (*a2a1.Task, error) {
		req := v1Message("wait", map[string]any{"receiver_id": "slow"})
		req.Config = &a2a1.SendMessageConfig{ReturnImmediately: true}
		res, err := vc.SendMessage(ctx, req)
		if err != nil {
			return nil, err
		}
		return res.(*a2a1.Task), nil
	}

	first, err := send03()
	must(t, err)
	second, err := send10()
	must(t, err)
	if first.Status.State.Terminal() || second.Status.State.Terminal() {
		t.Fatalf("non-blocking sends returned finished tasks: %s, %s", first.Status.State, second.Status.State)
	}
	const refusal = "too many background tasks (2)"
	if task, err := send03(); !refused03(err, refusal) {
		t.Fatalf("third background task (0.3): %+v, %v; want a server error saying %q", task, err, refusal)
	}
	if task, err := send10(); !refused10(err, refusal) {
		t.Fatalf("third background task (1.0): %+v, %v; want a server error saying %q", task, err, refusal)
	}
	bc, _ := f.a2aClient(t, f.srv.URL, nil)
	if got := sendTask(t, bc, userMessage("blocking", nil)); got.Status.State != a2a03.TaskStateCompleted {
		t.Fatalf("a blocking send at the bound: %s, want completed", got.Status.State)
	}

	_, err = pc.CancelTask(ctx, &a2a03.TaskIDParams{ID: first.ID})
	must(t, err)
	// The slot is given back when the canceled run has returned, after
	// the cancel's answer: retry within the test's bound.
	for {
		task, err := send03()
		if err == nil {
			if task.Status.State.Terminal() {
				t.Fatalf("background task after a slot freed: %s", task.Status.State)
			}
			break
		}
		if !refused03(err, refusal) || ctx.Err() != nil {
			t.Fatalf("background task after one was canceled: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// refused03 reports whether err is the -32000 server error (the a2a-go
// client's [a2a03.ErrServerError]) whose details say text.
func refused03(err error, text string) bool {
	var e *a2a03.Error
	return errors.Is(err, a2a03.ErrServerError) && errors.As(err, &e) && strings.Contains(fmt.Sprint(e.Message, e.Details), text)
}

// refused10 is refused03 for the a2a-go/v2 client.
func refused10(err error, text string) bool {
	var e *a2a1.Error
	return errors.Is(err, a2a1.ErrServerError) && errors.As(err, &e) && strings.Contains(fmt.Sprint(e.Message, e.Details), text)
}

// Guards: bound "`ListTasks` page" (50, at most 100; docs/bounds.md, A2A
// server). With 120 tasks stored, the a2a-go/v2 client's ListTasks without
// a pageSize gets 50 and a next page token, with pageSize 100 gets 100,
// and pageSize 101 is refused with INVALID_PARAMS naming the range.
func TestListTasksPageBound(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, _ := f.v1Client(t, f.srv.URL, a2a1.TransportProtocolJSONRPC)
	const stored = 120
	for i := range stored {
		v1Send(t, c, v1Message(fmt.Sprintf("task %d", i), nil))
	}
	list, err := c.ListTasks(ctx, &a2a1.ListTasksRequest{})
	must(t, err)
	if len(list.Tasks) != 50 || list.TotalSize != stored || list.NextPageToken == "" {
		t.Fatalf("ListTasks with no pageSize: %d tasks of %d, next %q; want a page of 50", len(list.Tasks), list.TotalSize, list.NextPageToken)
	}
	list, err = c.ListTasks(ctx, &a2a1.ListTasksRequest{PageSize: 100})
	must(t, err)
	if len(list.Tasks) != 100 || list.NextPageToken == "" {
		t.Fatalf("ListTasks pageSize 100: %d tasks, next %q", len(list.Tasks), list.NextPageToken)
	}
	if _, err := c.ListTasks(ctx, &a2a1.ListTasksRequest{PageSize: 101}); !errors.Is(err, a2a1.ErrInvalidParams) || !strings.Contains(err.Error(), "out of range 1..100") {
		t.Fatalf("ListTasks pageSize 101: %v, want INVALID_PARAMS naming 1..100", err)
	}
}
