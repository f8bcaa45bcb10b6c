package a2aremote_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/axocoatl/axocoatl-go/a2aremote"
)

// The module's SendMessage (its own, over JSON-RPC 1.0) answers what
// a2aclient's does, from a2a-go/v2's reference server (tasks completed
// and failed, an unknown task id) and from an axocoatl Engine.
func TestSendTransportMatchesA2AClient(t *testing.T) {
	remotes := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"reference-answer", func(t *testing.T) string { return serveV1(t, answer).URL }},
		{"reference-fail", func(t *testing.T) string { return serveV1(t, fail).URL }},
		{"axocoatl", func(t *testing.T) string { _, srv, _ := serveEngine(t, answerModel{}, ""); return srv.URL }},
	}
	for _, rm := range remotes {
		t.Run(rm.name, func(t *testing.T) {
			ctx := context.Background()
			url := rm.url(t)
			card, err := agentcard.DefaultResolver.Resolve(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(http.DefaultClient))
			if err != nil {
				t.Fatal(err)
			}
			ours, err := a2aremote.NewClient(ctx, card, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			send := func(c *a2aclient.Client, taskID a2a1.TaskID) (string, error) {
				msg := a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("hi"))
				msg.TaskID = taskID
				res, err := c.SendMessage(ctx, &a2a1.SendMessageRequest{Message: msg})
				if err != nil {
					return "", err
				}
				return comparable(t, res), nil
			}
			want, err := send(theirs, "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := send(ours, "")
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("ours:\n%s\na2aclient's:\n%s", got, want)
			}
			// An unknown task: both fail with the same A2A error (its kind,
			// checkable with errors.Is, and its text).
			_, theirErr := send(theirs, "no-such-task")
			var want2 *a2a1.Error
			if !errors.As(theirErr, &want2) {
				t.Fatalf("a2aclient: a message to an unknown task: %v, want an *a2a1.Error", theirErr)
			}
			_, ourErr := send(ours, "no-such-task")
			var got2 *a2a1.Error
			if !errors.As(ourErr, &got2) || !errors.Is(ourErr, want2.Err) || ourErr.Error() != theirErr.Error() {
				t.Errorf("ours: a message to an unknown task: %v (%#v); a2aclient's: %v (kind %v)", ourErr, got2, theirErr, want2.Err)
			}
		})
	}
}

// comparable is a result as JSON without what differs between two sends
// (ids, timestamps).
func comparable(t *testing.T, res a2a1.SendMessageResult) string {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var strip func(any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k := range x {
				switch k {
				case "id", "contextId", "taskId", "messageId", "artifactId", "timestamp":
					x[k] = "…"
				default:
					x[k] = strip(x[k])
				}
			}
		case []any:
			for i := range x {
				x[i] = strip(x[i])
			}
		}
		return v
	}
	out, _ := json.MarshalIndent(strip(v), "", " ")
	return string(out)
}
