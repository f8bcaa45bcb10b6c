package a2aremote_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/axocoatl/axocoatl-go/a2aremote"
)

// @a2a-js/sdk's 0.3 JSON-RPC layer answers a message/stream that fails
// before its first event (here: a message to a task it does not know)
// with one JSON-RPC error response, status 200, application/json; the
// call gets that error (ErrTaskNotFound with the remote's message), where
// the stream used to end empty. message/send and tasks/get of the same
// layer answer as a2a-go's.
func TestA2AJS03JSONRPCErrors(t *testing.T) {
	peer := serveA2AJS03(t, answer)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	card := &a2a1.AgentCard{Name: "Planner", Version: "1", Capabilities: a2a1.AgentCapabilities{Streaming: true},
		SupportedInterfaces: []*a2a1.AgentInterface{{URL: peer.URL + "/rpc", ProtocolBinding: a2a1.TransportProtocolJSONRPC, ProtocolVersion: "0.3"}}}
	c, err := a2aremote.NewClient(ctx, card, &http.Client{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.SendMessage(ctx, &a2a1.SendMessageRequest{Message: a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("hello"))})
	if task, ok := res.(*a2a1.Task); err != nil || !ok || task.Status.State != a2a1.TaskStateCompleted {
		t.Fatalf("SendMessage = %#v, %v; want the completed task", res, err)
	}
	if _, err := c.GetTask(ctx, &a2a1.GetTaskRequest{ID: "no-such-task"}); !errors.Is(err, a2a1.ErrTaskNotFound) {
		t.Fatalf("GetTask of an unknown task = %v, want ErrTaskNotFound", err)
	}
	msg := a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("hello"))
	msg.TaskID = "no-such-task"
	var events int
	for _, err = range c.SendStreamingMessage(ctx, &a2a1.SendMessageRequest{Message: msg}) {
		if err != nil {
			break
		}
		events++
	}
	if events != 0 || !errors.Is(err, a2a1.ErrTaskNotFound) || !strings.Contains(err.Error(), "no-such-task") {
		t.Fatalf("a stream to an unknown task: %d events, error %v; want ErrTaskNotFound naming the task", events, err)
	}
}
