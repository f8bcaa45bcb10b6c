package conversation_test

import (
	"testing"

	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/conversation/storetest"
)

// Guards: every conversations.* bound (storetest) on the in-memory store.
func TestMemoryStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T, l conversation.Limits) conversation.Store {
		s := conversation.NewMemory(l)
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
