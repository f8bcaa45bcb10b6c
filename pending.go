package axocoatl

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
)

// PendingTools announces a tool source whose tools are not registered yet:
// an MCP server on its first connect. A run whose agent may use such a
// source waits for it (see [Engine.AddPendingTools]) instead of starting
// without its tools.
type PendingTools struct {
	// Source names the source in logs and events (the MCP server's name).
	Source string
	// Prefix begins the name of every tool the source will register
	// (mcp__<server>__); an agent whose allow-list may match a name with
	// this prefix waits for the source. Zero: every agent waits.
	Prefix string
	// Wait is the longest a run waits for the source, from the moment the
	// run begins waiting (the source's own connect timeout: its first
	// attempt ends by then). Zero: DefaultPendingWait.
	Wait time.Duration
}

// DefaultPendingWait is PendingTools.Wait when zero.
const DefaultPendingWait = 30 * time.Second

// pendingSource is one announced source; ready is closed by its release.
type pendingSource struct {
	PendingTools
	ready chan struct{}
}

// AddPendingTools announces a source whose first attempt to register its
// tools is under way. Until the returned ready func is called (whether the
// attempt succeeded or failed), every run whose agent's allow-list may match
// one of its tools waits for it, at most p.Wait and within the run's own
// bounds (the caller's context, the agent's timeout, Close). A run that
// stops waiting with the source still pending goes on without its tools;
// the Engine logs a warning and the run's AgentActivated event lists the
// sources in "tools_pending". ready may be called more than once.
func (e *Engine) AddPendingTools(p PendingTools) (ready func()) {
	if p.Wait <= 0 {
		p.Wait = DefaultPendingWait
	}
	src := &pendingSource{PendingTools: p, ready: make(chan struct{})}
	e.mu.Lock()
	if e.pending == nil {
		e.pending = map[*pendingSource]struct{}{}
	}
	e.pending[src] = struct{}{}
	e.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Lock()
			delete(e.pending, src)
			e.mu.Unlock()
			close(src.ready)
		})
	}
}

// awaitTools waits for the pending sources spec may use (see
// AddPendingTools) and returns the names of those still pending, sorted; nil
// when none was. It ends early when ctx does.
func (e *Engine) awaitTools(ctx context.Context, spec *agent.Spec) []string {
	e.mu.RLock()
	if len(e.pending) == 0 {
		e.mu.RUnlock()
		return nil
	}
	var wait []*pendingSource
	for src := range e.pending {
		if mayAllowPrefix(spec, src.Prefix) {
			wait = append(wait, src)
		}
	}
	e.mu.RUnlock()
	if len(wait) == 0 {
		return nil
	}
	start := time.Now()
	var missing []string
	for _, src := range wait {
		// Every source's bound counts from the same start: waiting for
		// several costs the longest Wait, not their sum.
		left := src.Wait - time.Since(start)
		if !awaitClosed(ctx, src.ready, left) {
			missing = append(missing, src.Source)
		}
	}
	slices.Sort(missing)
	return slices.Compact(missing)
}

// awaitClosed waits until ch is closed (true), or d has passed or ctx ended
// (false, unless ch is closed by then).
func awaitClosed(ctx context.Context, ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	default:
	}
	if d <= 0 || ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// mayAllowPrefix reports whether spec's allow-list may admit a tool whose
// name begins with prefix. It errs towards yes: a pattern is compared by its
// literal part before the first wildcard, so a run may wait for a source
// none of whose tools it is allowed, never the reverse.
func mayAllowPrefix(spec *agent.Spec, prefix string) bool {
	if spec.Tools == nil || prefix == "" {
		return true
	}
	for _, g := range spec.Tools {
		lit := g
		if i := strings.IndexAny(g, `*?[\`); i >= 0 {
			lit = g[:i]
			if strings.HasPrefix(prefix, lit) {
				return true // the wildcard may stand for the rest of prefix
			}
		}
		if strings.HasPrefix(lit, prefix) {
			return true
		}
	}
	return false
}
