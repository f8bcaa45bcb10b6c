package lifecycle

import (
	"context"
	"errors"
	"sync"
	"testing"
)

var errStopped = errors.New("m stopped")

func TestState(t *testing.T) {
	var s State
	if err := s.CheckStart("m", errStopped); err != nil || s.Started() || s.Running() {
		t.Fatalf("new: %v", err)
	}
	s.MarkStarted()
	if err := s.CheckStart("m", errStopped); !errors.Is(err, ErrStarted) || err.Error() != "m: already started" || !s.Running() {
		t.Fatalf("started: %v", err)
	}
	if !s.Stop() || s.Stop() {
		t.Fatal("only the first Stop of a started module has anything to undo")
	}
	if err := s.CheckStart("m", errStopped); err != errStopped || s.Running() || !s.Started() || !s.Stopped() {
		t.Fatalf("stopped: %v", err)
	}
	var never State
	if never.Stop() {
		t.Fatal("a module never started has nothing to undo")
	}
	if err := never.CheckStart("m", nil); !errors.Is(err, ErrStarted) {
		t.Fatalf("stopped, nil error: %v", err)
	}
}

// Wait returns ctx's error once ctx ends, but only after the goroutines
// have: none outlives Stop.
func TestWaitOutlastsContext(t *testing.T) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	ended := false
	wg.Go(func() { <-release; ended = true })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	go close(release) // the goroutine ends only after Wait has seen ctx end, or not: either way Wait waits
	err := Wait(ctx, "m", &wg)
	if !ended {
		t.Fatal("Wait returned before the goroutine ended")
	}
	if err != nil && (!errors.Is(err, context.Canceled) || err.Error() != "m: stop: context canceled") {
		t.Fatalf("%v", err)
	}
	if err := Wait(context.Background(), "m", &wg); err != nil {
		t.Fatal(err)
	}
}
