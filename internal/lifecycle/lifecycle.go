// Package lifecycle is the start/stop bookkeeping every module does the
// same way: start once, never again after a stop, stop only what started,
// and wait for the module's goroutines on Stop within the caller's context.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ErrStarted is the error of a Start of a module started before.
var ErrStarted = errors.New("already started")

// State is where a module is in its life. The zero value is a module not
// started. Its owner changes it under its own lock, together with what it
// starts or stops; reading it needs no lock (request paths only ask
// whether the module started).
type State struct {
	started, stopped atomic.Bool
}

// CheckStart says whether the module may start: nil for a new one; its
// stopped error once stopped (nil: the same as for a started one); and
// "<name>: already started" (ErrStarted) once started. It does not change
// the state: the owner calls MarkStarted when its Start succeeded, so a
// Start that failed may be tried again.
func (s *State) CheckStart(name string, stopped error) error {
	switch {
	case s.stopped.Load() && stopped != nil:
		return stopped
	case s.started.Load() || s.stopped.Load():
		return fmt.Errorf("%s: %w", name, ErrStarted)
	}
	return nil
}

// MarkStarted records a successful Start.
func (s *State) MarkStarted() { s.started.Store(true) }

// Stop records the stop and reports whether the module was running
// (started and not stopped before): only then has Stop anything to undo.
func (s *State) Stop() (wasRunning bool) {
	wasStopped := s.stopped.Swap(true)
	return s.started.Load() && !wasStopped
}

// Started reports whether Start succeeded (a stop since does not change it).
func (s *State) Started() bool { return s.started.Load() }

// Stopped reports whether Stop was called.
func (s *State) Stopped() bool { return s.stopped.Load() }

// Running reports whether the module started and has not been stopped.
func (s *State) Running() bool { return s.started.Load() && !s.stopped.Load() }

// Wait waits for wg's goroutines. If ctx ends first it still waits for them
// (Stop has told them to end, and each is past its last bounded step: not
// waiting would leave them running after Stop) and returns
// "<name>: stop: <ctx's error>".
func Wait(ctx context.Context, name string, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		<-done
		return fmt.Errorf("%s: stop: %w", name, ctx.Err())
	}
}
