package boltstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/conversation/boltstore"
)

// An Engine whose conversations live in a bbolt file: the second turn's
// model request holds the first (the echo model answers with its input).
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "conversations")
	defer os.RemoveAll(dir)
	store, err := boltstore.Open(filepath.Join(dir, boltstore.FileName), boltstore.Options{
		Limits: conversation.Limits{MaxPerAgent: 1000},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close() // after the Engine: a store passed in is the host's to close
	e := axocoatl.New(axocoatl.Options{Conversations: store})
	defer e.Close(context.Background())
	_ = e.AddAgent(agent.Spec{ID: "assistant"}, provider.EchoModel{})

	ctx := context.Background()
	first, _ := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "assistant", Input: "hello", ConversationID: conversation.New})
	_, _ = e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "assistant", Input: "again", ConversationID: first.ConversationID})
	msgs, _ := store.Messages(ctx, first.ConversationID, 0, 0)
	for _, m := range msgs {
		fmt.Println(m.Role, m.Content)
	}
	// Output:
	// user hello
	// assistant hello
	// user again
	// assistant again
}
