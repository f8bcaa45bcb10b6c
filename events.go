package axocoatl

import (
	"context"
	"fmt"
	"maps"

	"github.com/axocoatl/axocoatl-go/lattice"
)

// The Engine's own event types: every run and every tool call publishes
// them. Each module names the events it publishes beside its own code
// (approval.EventRequested, mcpclient.EventServerConnected, …); the
// lattice names none.
const (
	// EventAgentActivated: a run began. Telemetry.
	EventAgentActivated = "AgentActivated"
	// EventTaskCompleted: a run ended with an answer. Coordination.
	EventTaskCompleted = "TaskCompleted"
	// EventAgentFailed: a run ended with an error. Coordination.
	EventAgentFailed = "AgentFailed"
	// EventToolCalled: a tool call began. Telemetry.
	EventToolCalled = "ToolCalled"
	// EventToolResult: a tool call ended. Telemetry.
	EventToolResult = "ToolResult"
	// EventModelResult: a model call of a run ended: the run's door, the
	// call's number in the run, duration, tokens, finish reason ([FinishStop],
	// [FinishToolCalls], [FinishError]) and error. Telemetry: a webhook
	// gets it only when its events name it. The answer's text is not in
	// it, and its deltas are never events.
	EventModelResult = "ModelResult"
)

// ObserveOnlyEvents are the Engine's event types that nothing in this
// module acts on, only shows (dashboards, run timelines; a webhook takes
// them only when verified): a run's start, its model calls and its tool
// calls. A cluster with a key may publish them unsigned and take them
// unsigned, marked unverified (lattice/nats: Options.ObserveOnly, which
// package config sets to these), which keeps three of every run's
// signatures off its path. A run's end (TaskCompleted, AgentFailed) and
// every module's events stay signed.
func ObserveOnlyEvents() []string {
	return []string{EventAgentActivated, EventModelResult, EventToolCalled, EventToolResult}
}

// coreClass is the class of the Engine's own event types, and of any
// other type lattice.ClassAny (which a filter takes for coordination).
func coreClass(eventType string) lattice.Class {
	switch eventType {
	case EventAgentActivated, EventToolCalled, EventToolResult, EventModelResult:
		return lattice.ClassTelemetry
	case EventTaskCompleted, EventAgentFailed:
		return lattice.ClassCoordination
	}
	return lattice.ClassAny
}

// EventDeclarer is a Module that publishes event types of its own. [Engine.Use]
// reads Events before it starts the module; from then on [Engine.Publish]
// gives an event of a declared type its declared class, which is how a
// lattice.Filter by class (and a webhook's default of coordination events)
// sees it. A type nobody declares is coordination.
type EventDeclarer interface {
	Module
	// Events maps each event type the module publishes to its class
	// (lattice.ClassCoordination or lattice.ClassTelemetry).
	Events() map[string]lattice.Class
}

// declare records a module's event classes. A type the Engine or another
// module already declared with another class is refused: one of the two
// would have its events filtered as the other says.
func (e *Engine) declare(m EventDeclarer) error {
	events := m.Events()
	e.mu.Lock()
	defer e.mu.Unlock()
	for typ, c := range events {
		if c != lattice.ClassCoordination && c != lattice.ClassTelemetry {
			return fmt.Errorf("event %s: class %s: must be coordination or telemetry", typ, c)
		}
		if core := coreClass(typ); core != lattice.ClassAny {
			return fmt.Errorf("event %s: the Engine's own event type", typ)
		}
		if was, ok := e.classes[typ]; ok && was != c {
			return fmt.Errorf("event %s: declared %s, already declared %s by another module", typ, c, was)
		}
	}
	if e.classes == nil {
		e.classes = make(map[string]lattice.Class, len(events))
	}
	maps.Copy(e.classes, events)
	return nil
}

// ClassOf returns the class of an event type as this Engine knows it: the
// Engine's own, those its modules declared, and coordination for any
// other. [Engine.Publish] stamps it on the events it builds; a host that
// publishes on [Engine.Bus] itself sets lattice.Event.Class with it.
func (e *Engine) ClassOf(eventType string) lattice.Class {
	if c := coreClass(eventType); c != lattice.ClassAny {
		return c
	}
	e.mu.RLock()
	c, ok := e.classes[eventType]
	e.mu.RUnlock()
	if !ok {
		return lattice.ClassCoordination
	}
	return c
}

// Declared reports whether eventType is one of the Engine's own event types
// or one a started module declared ([EventDeclarer]): the events only the
// runtime publishes, which a door that lets clients publish events refuses
// and which metrics may count by name (the set is bounded by the code, not
// by clients).
func (e *Engine) Declared(eventType string) bool {
	if coreClass(eventType) != lattice.ClassAny {
		return true
	}
	e.mu.RLock()
	_, ok := e.classes[eventType]
	e.mu.RUnlock()
	return ok
}

// ReplicatingModule is a Module that keeps state in step with the modules
// of other Engines on a shared lattice (the approval gate's pending
// table).
type ReplicatingModule interface {
	Module
	// Resync exchanges that state again: what was published while this
	// process was cut off from the lattice reached neither side. It must
	// not block on the network.
	Resync(ctx context.Context)
}

// Resync tells every started ReplicatingModule that this process was cut
// off from a shared lattice and is back (the cluster module calls it when
// its NATS connection returns), so that modules that replicate state
// exchange it again without the caller knowing any of them.
func (e *Engine) Resync(ctx context.Context) {
	e.mu.RLock()
	var rs []ReplicatingModule
	for _, m := range e.modules {
		if r, ok := m.(ReplicatingModule); ok {
			rs = append(rs, r)
		}
	}
	e.mu.RUnlock()
	for _, r := range rs {
		r.Resync(ctx)
	}
}
