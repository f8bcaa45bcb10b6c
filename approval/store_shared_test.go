package approval

import (
	"fmt"
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

// Two processes writing at the same time: each write re-reads the file
// and renames a new one over it, so without a lock around the two a write
// between another's read and rename was lost. Two stores in one process
// collide as two processes do (each takes its own lock on the file).
func TestStoreConcurrentWritersLoseNothing(t *testing.T) {
	dir := t.TempDir()
	const perStore = 40
	stores := []*store{newStore(dir), newStore(dir)}
	errs := make(chan error, len(stores))
	for i, s := range stores {
		go func() {
			for j := range perStore {
				r := Remembered{AgentID: fmt.Sprintf("agent%d", i), Tool: fmt.Sprintf("t%d", j), Decision: Allow, DecidedAt: time.Now().UTC()}
				if err := s.put(r); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range stores {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	fresh := newStore(dir)
	if err := fresh.load(); err != nil {
		t.Fatal(err)
	}
	if got, want := len(fresh.list()), len(stores)*perStore; got != want {
		t.Fatalf("%d decisions on disk after two concurrent writers, want %d", got, want)
	}
}

// A decision revoked in one process (DELETE on the daemon) no longer
// applies in the other (`mcp serve`): get re-reads a file another process
// replaced. Before, the other process kept allowing the tool until its
// next start or write.
func TestStoreRevokedInOtherProcess(t *testing.T) {
	dir := t.TempDir()
	a, b := newStore(dir), newStore(dir)
	if err := a.put(Remembered{AgentID: "x", Tool: "t", Decision: Allow, DecidedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := b.load(); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.get("x", "t"); !ok {
		t.Fatal("b does not see a's decision after loading")
	}
	if found, err := a.remove("x", "t"); err != nil || !found {
		t.Fatalf("remove: %v, %v", found, err)
	}
	if r, ok := b.get("x", "t"); ok {
		t.Fatalf("b still applies the decision a revoked: %+v", r)
	}
	if got := b.list(); len(got) != 0 {
		t.Fatalf("b lists revoked decisions: %+v", got)
	}
}
