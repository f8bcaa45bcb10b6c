package approval

import (
	"testing"
	"time"
)

// Two processes on one data dir (the daemon and `mcp serve`): each one's
// remembered decisions survive the other's writes. Before, a write saved
// only what its own process had read at start, dropping the other's.
func TestStoreSharedBetweenProcesses(t *testing.T) {
	dir := t.TempDir()
	a, b := newStore(dir), newStore(dir)
	for _, s := range []*store{a, b} {
		if err := s.load(); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	if err := a.put(Remembered{AgentID: "x", Tool: "t1", Decision: Allow, DecidedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := b.put(Remembered{AgentID: "x", Tool: "t2", Decision: Deny, DecidedAt: now}); err != nil {
		t.Fatal(err)
	}
	fresh := newStore(dir)
	if err := fresh.load(); err != nil {
		t.Fatal(err)
	}
	if got := fresh.list(); len(got) != 2 || got[0].Tool != "t1" || got[1].Tool != "t2" {
		t.Fatalf("on disk after both wrote: %+v, want t1 and t2", got)
	}
	if _, ok := b.get("x", "t1"); !ok {
		t.Fatal("b does not see a's decision after its own write")
	}
}
