package a2a

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/conversation"
)

// stallingStore is the in-memory store whose Get of conversation
// "stalled" hangs until its context ends, as a shared store on a network
// that stopped answering.
type stallingStore struct{ *conversation.Memory }

func (s stallingStore) Get(ctx context.Context, id string) (conversation.Info, error) {
	if id != "stalled" {
		return s.Memory.Get(ctx, id)
	}
	<-ctx.Done()
	return conversation.Info{}, ctx.Err()
}

// A message whose conversation look-up hangs is refused with -32603 once
// the look-up's bound has passed, and the handler goes on serving.
// Guards: the 10 s conversation look-up of a message.
func TestConversationLookupBounded(t *testing.T) {
	store := stallingStore{conversation.NewMemory(conversation.Limits{})}
	eng := axocoatl.New(axocoatl.Options{Conversations: store})
	if err := eng.AddAgent(agent.Spec{ID: "echo"}, provider.EchoModel{}); err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	h.lookupTimeout = 50 * time.Millisecond
	if err := eng.Use(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		// The handler first: it ends a look-up still hanging, which
		// srv.Close would wait for.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Close(ctx)
		srv.Close()
		_ = eng.Close(ctx)
		_ = store.Close()
	})
	client := &http.Client{Timeout: 5 * time.Second} // far above the bound, far below the test's
	send := func(contextID string) (code int, text string) {
		t.Helper()
		msg := `{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]` + contextID + `}`
		resp, err := client.Post(srv.URL+"/a2a", "application/json",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":`+msg+`}}`))
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var r struct {
			Error *struct {
				Code int
				Data struct{ Error string }
			}
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("reply: %s", b)
		}
		if r.Error == nil {
			return 0, string(b)
		}
		return r.Error.Code, r.Error.Data.Error
	}
	code, text := send(`,"contextId":"stalled"`)
	if code != -32603 || !strings.Contains(text, "contextId stalled: reading the conversation: context deadline exceeded") {
		t.Fatalf("a hung look-up: %d %q, want -32603 naming the deadline", code, text)
	}
	// The handler goes on serving.
	if code, out := send(""); code != 0 || !strings.Contains(out, `"state":"completed"`) {
		t.Fatalf("a new conversation after the refusal: %d %s", code, out)
	}
}
