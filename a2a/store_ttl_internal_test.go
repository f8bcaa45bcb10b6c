package a2a

import (
	"testing"
	"time"
)

// Guards: bound a2a.task_ttl (docs/bounds.md) for tasks nobody asks for
// again: a finished task past its TTL is dropped when the next task is
// stored, not only when a tasks/get finds it expired (TestStoreTTL), so
// unread tasks do not stay until max_tasks pushes them out.
func TestStoreTTLSweepsUnreadTasks(t *testing.T) {
	const ttl = 20 * time.Millisecond
	s := newTaskStore(100, ttl, 1<<30)
	storedTask(s, "old", 1, true)
	storedTask(s, "running", 1, false)
	stored := time.Now()
	for time.Since(stored) <= ttl { // the TTL is time itself
		time.Sleep(ttl)
	}
	storedTask(s, "new", 1, true)
	if n := s.len(); n != 2 {
		t.Fatalf("%d tasks kept, want 2: the finished one past its TTL dropped, the running one and the new one kept", n)
	}
	s.mu.Lock()
	_, old := s.byID["old"]
	_, running := s.byID["running"]
	s.mu.Unlock()
	if old || !running {
		t.Fatalf("old kept %v, running kept %v", old, running)
	}
}
