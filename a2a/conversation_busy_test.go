package a2a_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/conversation"
)

// turnClient is one generation's client reduced to what a turn needs.
type turnClient struct {
	name string
	// send sends text blocking; stream streams it and returns the final
	// status (its state and text).
	send   func(ctx context.Context, text, contextID, receiver string) (taskID, ctxID, output string, err error)
	stream func(ctx context.Context, text, contextID, receiver string) (state, status string, err error)
	// refused reports whether err is UnsupportedOperation, and its text.
	refused func(err error) (bool, string)
}

func meta(receiver string) map[string]any {
	if receiver == "" {
		return nil
	}
	return map[string]any{"receiver_id": receiver}
}

// turnClients are the a2a-go v0.3 client and the a2a-go/v2 one on both
// bindings, against cf.
func turnClients(t *testing.T, cf *convFixture) []turnClient {
	c03, _ := cf.a2aClient(t, cf.srv.URL, nil)
	out := []turnClient{{
		name: "0.3",
		send: func(ctx context.Context, text, contextID, receiver string) (string, string, string, error) {
			p := userMessage(text, meta(receiver))
			p.Message.ContextID = contextID
			res, err := c03.SendMessage(ctx, p)
			if err != nil {
				return "", "", "", err
			}
			task, ok := res.(*a2a03.Task)
			if !ok || len(task.Artifacts) != 1 {
				return "", "", "", errors.New("no task with an output")
			}
			return string(task.ID), task.ContextID, task.Artifacts[0].Parts[0].(a2a03.TextPart).Text, nil
		},
		stream: func(ctx context.Context, text, contextID, receiver string) (string, string, error) {
			p := userMessage(text, meta(receiver))
			p.Message.ContextID = contextID
			var state, status string
			for ev, err := range c03.SendStreamingMessage(ctx, p) {
				if err != nil {
					return "", "", err
				}
				if e, ok := ev.(*a2a03.TaskStatusUpdateEvent); ok && e.Final {
					state = string(e.Status.State)
					if e.Status.Message != nil {
						status = e.Status.Message.Parts[0].(a2a03.TextPart).Text
					}
				}
			}
			return state, status, nil
		},
		refused: func(err error) (bool, string) { return errors.Is(err, a2a03.ErrUnsupportedOperation), detail03(err) },
	}}
	for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		c, _, _ := cf.v1Client(t, cf.srv.URL, binding)
		out = append(out, turnClient{
			name: "1.0-" + string(binding),
			send: func(ctx context.Context, text, contextID, receiver string) (string, string, string, error) {
				req := v1Message(text, meta(receiver))
				req.Message.ContextID = contextID
				res, err := c.SendMessage(ctx, req)
				if err != nil {
					return "", "", "", err
				}
				task, ok := res.(*a2a1.Task)
				if !ok || len(task.Artifacts) != 1 {
					return "", "", "", errors.New("no task with an output")
				}
				return string(task.ID), task.ContextID, task.Artifacts[0].Parts[0].Text(), nil
			},
			stream: func(ctx context.Context, text, contextID, receiver string) (string, string, error) {
				req := v1Message(text, meta(receiver))
				req.Message.ContextID = contextID
				var state, status string
				for ev, err := range c.SendStreamingMessage(ctx, req) {
					if err != nil {
						return "", "", err
					}
					if e, ok := ev.(*a2a1.TaskStatusUpdateEvent); ok {
						state = string(e.Status.State)
						if e.Status.Message != nil {
							status = e.Status.Message.Parts[0].Text()
						}
					}
				}
				return state, status, nil
			},
			refused: func(err error) (bool, string) {
				if err == nil {
					return false, ""
				}
				return errors.Is(err, a2a1.ErrUnsupportedOperation), err.Error()
			},
		})
	}
	return out
}

type sent struct {
	taskID, ctxID, output string
	err                   error
}

func recvSent(t *testing.T, ch <-chan sent) sent {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for a send to return")
		return sent{}
	}
}

func (cf *convFixture) waitStarted(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-cf.gate.started:
		if got != want {
			t.Fatalf("the gate model started on %q, want %q", got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for the run of %q", want)
	}
}

// Two turns of one context never run at once. A message while a turn the
// handler started runs is refused with -32004 naming the running task,
// and leaves nothing; once that turn has ended the next one runs. A turn
// running through another door (the Engine's lease) refuses an A2A
// message the same way: a blocking send gets -32004 and no task is kept, a
// streamed one ends rejected saying why.
// Guards: one turn of a contextId at once.
func TestConversationBusy(t *testing.T) {
	cf := newConvFixture(t, conversation.Limits{})
	ctx := context.Background()
	for _, c := range turnClients(t, cf) {
		t.Run(c.name+"/a2a", func(t *testing.T) {
			ctxID := "busy-" + strings.ReplaceAll(c.name, "+", "")
			first := make(chan sent, 1)
			go func() {
				var s sent
				s.taskID, s.ctxID, s.output, s.err = c.send(ctx, "first", ctxID, "gate")
				first <- s
			}()
			cf.waitStarted(t, "first")

			tasks := tasksListed(t, cf)
			_, _, _, err := c.send(ctx, "second", ctxID, "")
			busy, text := c.refused(err)
			if !busy || !strings.Contains(text, "context "+ctxID+" has a turn running (task ") || !strings.Contains(text, conversation.ErrBusy.Error()) {
				t.Fatalf("a second message while a turn runs: %v (%q), want UnsupportedOperation naming the running task", err, text)
			}
			if n := tasksListed(t, cf); n != tasks {
				t.Fatalf("the refused message left a task: %d → %d", tasks, n)
			}

			cf.gate.release <- struct{}{}
			s := recvSent(t, first)
			if s.err != nil || s.ctxID != ctxID || s.output != "gated: first" || !strings.Contains(text, "(task "+s.taskID+", ") {
				t.Fatalf("first turn: %+v; the refusal named %q", s, text)
			}
			// The first send has returned, so its turn has ended: the
			// next message runs, and the conversation holds both turns.
			cf.gate.release <- struct{}{}
			_, got, out, err := c.send(ctx, "third", ctxID, "")
			if err != nil || got != ctxID || out != "gated: third" {
				t.Fatalf("third turn: %q %q %v", got, out, err)
			}
			<-cf.gate.started // "third"
			info, err := cf.convs.Get(ctx, ctxID)
			if err != nil || info.Messages != 4 {
				t.Fatalf("conversation after two turns and a refusal: %+v %v", info, err)
			}
		})

		t.Run(c.name+"/another-door", func(t *testing.T) {
			ctxID := "door-" + strings.ReplaceAll(c.name, "+", "")
			door := make(chan error, 1)
			go func() {
				_, err := cf.eng.ExecuteRequest(ctx, axocoatl.Request{AgentID: "gate", Input: "by the door", ConversationID: ctxID, CreateConversation: true})
				door <- err
			}()
			cf.waitStarted(t, "by the door")

			tasks := tasksListed(t, cf)
			_, _, _, err := c.send(ctx, "blocking", ctxID, "")
			busy, text := c.refused(err)
			if !busy || !strings.Contains(text, conversation.ErrBusy.Error()) || !strings.Contains(text, "through another door or daemon") {
				t.Fatalf("a message while another door's turn runs: %v (%q), want UnsupportedOperation, busy", err, text)
			}
			if n := tasksListed(t, cf); n != tasks {
				t.Fatalf("the refused blocking send kept its task: %d → %d", tasks, n)
			}
			state, status, err := c.stream(ctx, "streamed", ctxID, "")
			if err != nil || !strings.Contains(strings.ToLower(state), "rejected") || !strings.Contains(status, conversation.ErrBusy.Error()) {
				t.Fatalf("a streamed message while another door's turn runs: final %q %q, %v; want rejected, busy", state, status, err)
			}

			cf.gate.release <- struct{}{}
			select {
			case err := <-door:
				must(t, err)
			case <-time.After(30 * time.Second):
				t.Fatal("timed out waiting for the door's turn")
			}
			info, err := cf.convs.Get(ctx, ctxID)
			if err != nil || info.Messages != 2 {
				t.Fatalf("conversation after the door's turn and two refusals: %+v %v", info, err)
			}
		})
	}
}

// A conversation at its bound (conversation.Limits.MaxMessages) takes no
// more turns: -32004 saying which bound, before any task exists.
func TestConversationFull(t *testing.T) {
	cf := newConvFixture(t, conversation.Limits{MaxMessages: 6})
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			one := sendOn(t, cf, wire, "", wireMsg{text: "one", receiver: "other"})
			two := sendOn(t, cf, wire, "", wireMsg{text: "two", contextID: one.task.ContextID})
			three := sendOn(t, cf, wire, "", wireMsg{text: "three", contextID: one.task.ContextID})
			if two.task.Output != "two" || three.task.Output != "three" {
				t.Fatalf("turns: %+v %+v", two, three)
			}
			tasks := tasksListed(t, cf)
			// Non-blocking too: the answer is the error, not a task that
			// fails later.
			for _, async := range []bool{false, true} {
				a := sendOn(t, cf, wire, "", wireMsg{text: "four", contextID: one.task.ContextID, async: async})
				if a.code != -32004 || !strings.Contains(a.text, "holds 6 messages and this turn adds 2 (max_messages 6): start a new conversation") {
					t.Fatalf("a fourth turn (non-blocking %v): %d %q %+v, want -32004 naming max_messages", async, a.code, a.text, a.task)
				}
			}
			if n := tasksListed(t, cf); n != tasks {
				t.Fatalf("the refused turn left a task: %d → %d", tasks, n)
			}
		})
	}
}
