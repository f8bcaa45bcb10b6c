package a2a

import (
	"fmt"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
)

func storedTask(s *taskStore, id string, size int64, finished bool) *task {
	t := newTask(a2a03.TaskID(id), "c", "agent", storedMessage{v03: &a2a03.Message{}}, "", func() {})
	s.add(t, size)
	if finished {
		t.finish(a2a03.TaskStateCompleted, "out", "")
	}
	return t
}

// Guards: bound a2a.max_tasks (docs/bounds.md).
func TestStoreCountBound(t *testing.T) {
	s := newTaskStore(3, time.Hour, 1<<30)
	running := storedTask(s, "running", 1, false)
	for i := range 5 {
		storedTask(s, fmt.Sprint(i), 1, true)
	}
	// Running tasks are never evicted; the oldest finished ones go first.
	if s.get("running") != running || s.get("0") != nil || s.get("1") != nil || s.get("2") != nil || s.get("4") == nil {
		t.Fatalf("after overflow: %d tasks", s.len())
	}
	if s.len() != 3 {
		t.Fatalf("len %d, want 3", s.len())
	}
}

// Guards: bound a2a.task_ttl (docs/bounds.md).
func TestStoreTTL(t *testing.T) {
	s := newTaskStore(100, 20*time.Millisecond, 1<<30)
	storedTask(s, "old", 1, true)
	time.Sleep(40 * time.Millisecond)
	if s.get("old") != nil {
		t.Fatal("expired task still served")
	}
	storedTask(s, "a", 1, true)
	if s.len() != 1 {
		t.Fatalf("len %d, want 1", s.len())
	}
}

// Guards: bound a2a.max_store_bytes (docs/bounds.md).
func TestStoreByteBound(t *testing.T) {
	s := newTaskStore(100, time.Hour, 100)
	storedTask(s, "a", 60, true)
	storedTask(s, "b", 60, true)
	if s.get("a") != nil || s.get("b") == nil || s.bytes != 60 {
		t.Fatalf("byte bound: a=%v b=%v bytes=%d", s.get("a") != nil, s.get("b") != nil, s.bytes)
	}
	b := s.get("b")
	s.grow(b, 50) // b alone is over the bound, and finished: it goes too
	if s.len() != 0 || s.bytes != 0 {
		t.Fatalf("after grow: len %d bytes %d", s.len(), s.bytes)
	}
}
