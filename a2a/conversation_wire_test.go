package a2a_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/axocoatl/axocoatl-go/conversation"
)

// wireMsg is a message to send on one of the three wires.
type wireMsg struct {
	text, contextID, taskID, receiver string
	// async: a non-blocking send (0.3 configuration.blocking false, 1.0
	// returnImmediately).
	async bool
}

// wireAnswer is what a send on one wire came back with: the task, or the
// error's code, text (0.3: the message and error.data.error; 1.0: the
// message) and, on REST, the HTTP status and ErrorInfo reason.
type wireAnswer struct {
	task   struct{ ID, ContextID, State, Output string }
	code   int
	text   string
	status int
	reason string
}

// The three wires of a send: A2A 0.3 JSON-RPC, 1.0 JSON-RPC, 1.0 HTTP+JSON.
var wires = []string{"0.3", "1.0", "rest"}

// sendOn sends m on wire (to path, "" for the instance endpoint) as raw
// JSON, the way any client of that wire would.
func sendOn(t *testing.T, cf *convFixture, wire, path string, m wireMsg) wireAnswer {
	t.Helper()
	msg := map[string]any{"messageId": fmt.Sprintf("m-%s-%s", wire, m.text), "parts": []any{map[string]any{"text": m.text}}}
	if wire == "0.3" {
		msg["kind"], msg["role"] = "message", "user"
		msg["parts"] = []any{map[string]any{"kind": "text", "text": m.text}}
	} else {
		msg["role"] = "ROLE_USER"
	}
	if m.contextID != "" {
		msg["contextId"] = m.contextID
	}
	if m.taskID != "" {
		msg["taskId"] = m.taskID
	}
	if m.receiver != "" {
		msg["metadata"] = map[string]any{"receiver_id": m.receiver}
	}
	req := map[string]any{"message": msg}
	switch {
	case m.async && wire == "0.3":
		req["configuration"] = map[string]any{"blocking": false}
	case m.async:
		req["configuration"] = map[string]any{"returnImmediately": true}
	}
	params, err := json.Marshal(req)
	must(t, err)
	base := "/a2a"
	if path != "" {
		base = path
	}
	var a wireAnswer
	var result json.RawMessage
	switch wire {
	case "rest":
		status, out := do(t, cf.fixture, http.MethodPost, base+"/message:send", string(params), "A2A-Version", "1.0")
		a.status = status
		if status == http.StatusOK {
			result = json.RawMessage(out)
			break
		}
		var e struct {
			Error struct {
				Message string                    `json:"message"`
				Details []struct{ Reason string } `json:"details"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(out), &e); err != nil || len(e.Error.Details) != 1 {
			t.Fatalf("REST error body: %s", out)
		}
		a.text, a.reason = e.Error.Message, e.Error.Details[0].Reason
		a.code = codeOfReason(t, a.reason)
	default:
		method, header := "message/send", []string{}
		if wire == "1.0" {
			method, header = "SendMessage", []string{"A2A-Version", "1.0"}
		}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params)
		status, out := post(t, cf.fixture, base, body, header...)
		if status != http.StatusOK {
			t.Fatalf("HTTP %d: %s", status, out)
		}
		r := decodeReply(t, out)
		if r.Error == nil {
			result = r.Result
			break
		}
		a.code, a.text = r.Error.Code, r.Error.Message
		var data struct{ Error string }
		if wire == "0.3" && json.Unmarshal(r.Error.Data, &data) == nil {
			a.text += ": " + data.Error
		}
	}
	if result != nil {
		a.task = decodeTask(t, wire, result)
	}
	return a
}

// decodeTask reads the task of a send's result on wire.
func decodeTask(t *testing.T, wire string, raw json.RawMessage) (task struct{ ID, ContextID, State, Output string }) {
	t.Helper()
	var v struct {
		Task      *json.RawMessage `json:"task"`
		ID        string           `json:"id"`
		ContextID string           `json:"contextId"`
		Status    struct{ State string }
		Artifacts []struct {
			Parts []struct{ Text string }
		}
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("result: %v: %s", err, raw)
	}
	if wire != "0.3" { // a SendMessageResponse: {"task": …}
		if v.Task == nil {
			t.Fatalf("result is no task: %s", raw)
		}
		return decodeTask(t, "0.3", *v.Task)
	}
	task.ID, task.ContextID, task.State = v.ID, v.ContextID, v.Status.State
	if len(v.Artifacts) == 1 && len(v.Artifacts[0].Parts) == 1 {
		task.Output = v.Artifacts[0].Parts[0].Text
	}
	return task
}

func codeOfReason(t *testing.T, reason string) int {
	t.Helper()
	for _, c := range []int{-32001, -32004, -32602} {
		if reasonOf(c) == reason {
			return c
		}
	}
	t.Fatalf("unexpected reason %q", reason)
	return 0
}

func reasonOf(code int) string {
	switch code {
	case -32001:
		return a2a1.ErrorReason(a2a1.ErrTaskNotFound)
	case -32004:
		return a2a1.ErrorReason(a2a1.ErrUnsupportedOperation)
	case -32602:
		return a2a1.ErrorReason(a2a1.ErrInvalidParams)
	}
	return ""
}

// restStatusOf is the HTTP status of code on the REST binding (a2a.proto).
func restStatusOf(code int) int {
	if code == -32001 {
		return http.StatusNotFound
	}
	return http.StatusBadRequest
}

// tasksListed is how many tasks ListTasks counts.
func tasksListed(t *testing.T, cf *convFixture) int {
	t.Helper()
	status, out := do(t, cf.fixture, http.MethodGet, "/a2a/tasks?pageSize=1", "", "A2A-Version", "1.0")
	var l struct{ TotalSize int }
	if status != http.StatusOK || json.Unmarshal([]byte(out), &l) != nil {
		t.Fatalf("ListTasks: HTTP %d %s", status, out)
	}
	return l.TotalSize
}

// Bad input about contexts and tasks, on every wire: each refused with the
// error A2A gives for it and a message naming what was wrong, and none
// leaves a task or a conversation behind.
// Guards: a client's contextId (128 bytes of [A-Za-z0-9._:-]).
func TestConversationBadInput(t *testing.T) {
	cf := newConvFixture(t, conversation.Limits{})
	ctx := context.Background()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			mine := sendOn(t, cf, wire, "", wireMsg{text: "mine", receiver: "chat"})
			theirs := sendOn(t, cf, wire, "", wireMsg{text: "theirs", receiver: "other"})
			if mine.task.Output != "answer: found: mine" || theirs.task.Output != "theirs" || mine.task.ContextID == theirs.task.ContextID {
				t.Fatalf("setup: %+v %+v", mine, theirs)
			}
			// A known context without receiver_id goes to its own agent.
			again := sendOn(t, cf, wire, "", wireMsg{text: "theirs again", contextID: theirs.task.ContextID})
			if again.task.Output != "theirs again" || again.task.ContextID != theirs.task.ContextID {
				t.Fatalf("a message to another agent's context without receiver_id: %+v", again)
			}

			tooLong := strings.Repeat("c", conversation.MaxIDLength+1)
			for _, tc := range []struct {
				name string
				path string
				msg  wireMsg
				code int
				want []string
			}{
				{"unknown task in a known context", "", wireMsg{taskID: "no-such-task", contextID: mine.task.ContextID, receiver: "chat"},
					-32001, []string{`task "no-such-task" in context "` + mine.task.ContextID + `"`}},
				{"task of another context", "", wireMsg{taskID: mine.task.ID, contextID: theirs.task.ContextID},
					-32602, []string{"taskId " + mine.task.ID + " belongs to context " + mine.task.ContextID + ", not \"" + theirs.task.ContextID}},
				{"another agent's context", "", wireMsg{contextID: theirs.task.ContextID, receiver: "chat"},
					-32602, []string{"contextId " + theirs.task.ContextID + " is a conversation of another agent, not of chat"}},
				{"another agent's context, per-agent URL", "/a2a/agents/chat", wireMsg{contextID: theirs.task.ContextID},
					-32602, []string{"is a conversation of another agent, not of chat"}},
				{"context too long", "", wireMsg{contextID: tooLong, receiver: "chat"},
					-32602, []string{`contextId "` + tooLong[:64] + "…\" is not a conversation id: 1 to 128 of [A-Za-z0-9._:-]"}},
				{"context with bad characters", "", wireMsg{contextID: "my context/1", receiver: "chat"},
					-32602, []string{`contextId "my context/1" is not a conversation id`}},
				{"context reserved", "", wireMsg{contextID: conversation.New, receiver: "chat"},
					-32602, []string{`contextId "new" is not a conversation id`, `("new" is reserved)`}},
				{"finished task", "", wireMsg{taskID: mine.task.ID, receiver: "chat"},
					-32004, []string{"task " + mine.task.ID + " is completed and takes no more messages", "send contextId " + mine.task.ContextID}},
				{"finished task in its context", "", wireMsg{taskID: mine.task.ID, contextID: mine.task.ContextID},
					-32004, []string{"takes no more messages"}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					before := tasksListed(t, cf)
					convs, err := cf.convs.List(ctx, conversation.Query{})
					must(t, err)
					tc.msg.text = "x"
					a := sendOn(t, cf, wire, tc.path, tc.msg)
					if a.code != tc.code {
						t.Fatalf("code %d (%q), want %d; task %+v", a.code, a.text, tc.code, a.task)
					}
					for _, w := range tc.want {
						if !strings.Contains(a.text, w) {
							t.Fatalf("error %q does not say %q", a.text, w)
						}
					}
					if wire == "rest" && (a.status != restStatusOf(tc.code) || a.reason != reasonOf(tc.code)) {
						t.Fatalf("REST: HTTP %d %s, want %d %s", a.status, a.reason, restStatusOf(tc.code), reasonOf(tc.code))
					}
					after, err := cf.convs.List(ctx, conversation.Query{})
					must(t, err)
					if n := tasksListed(t, cf); n != before || len(after.Conversations) != len(convs.Conversations) {
						t.Fatalf("a refused message left something: tasks %d → %d, conversations %d → %d",
							before, n, len(convs.Conversations), len(after.Conversations))
					}
				})
			}

			// A client's own well-formed contextId starts a conversation of
			// that id (A2A 1.0 §3.4.1), which the next message continues.
			own := "client-ctx-" + strings.ReplaceAll(wire, ".", "")
			first := sendOn(t, cf, wire, "", wireMsg{text: "own one", contextID: own, receiver: "chat"})
			second := sendOn(t, cf, wire, "", wireMsg{text: "own two", contextID: own})
			if first.task.ContextID != own || second.task.ContextID != own || second.task.Output != "answer: found: own two" {
				t.Fatalf("client contextId: %+v %+v", first, second)
			}
			info, err := cf.convs.Get(ctx, own)
			if err != nil || info.AgentID != "chat" || info.Messages != 8 {
				t.Fatalf("conversation %s: %+v %v", own, info, err)
			}
		})
	}
}
