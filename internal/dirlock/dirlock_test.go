package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A second holder is refused at once with the first one's pid; after Close
// the lock is free again. flock locks belong to an open file, so two opens
// in one process collide as two processes do.
func TestTryLockNamesTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "axocoatl.lock")
	l, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = TryLock(path)
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d (", os.Getpid())) {
		t.Fatalf("second lock: %v, want ErrHeld naming pid %d", err, os.Getpid())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := TryLock(path)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	l2.Close()
}

// Wait takes a free lock, and refuses one held past its bound with ErrHeld
// (a holder that never lets go costs a writer d, not forever).
func TestWaitBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.json.lock")
	l, err := Wait(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Wait(path, 20*time.Millisecond); !errors.Is(err, ErrHeld) {
		t.Fatalf("Wait on a held lock: %v, want ErrHeld", err)
	}
	l.Close()
	l2, err := Wait(path, time.Second)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	l2.Close()
}
