package agent

import "time"

// RunEventKind says what a [RunEvent] reports.
type RunEventKind uint8

const (
	// RunDelta is a piece of a model's answer as it is written
	// ([RunEvent.Delta]): text, or a tool call and its arguments.
	RunDelta RunEventKind = iota + 1
	// RunToolStarted is a tool call about to run: [RunEvent.ToolCallID]
	// and [RunEvent.ToolName] are set.
	RunToolStarted
	// RunToolFinished is a tool call that returned: ToolCallID, ToolName,
	// [RunEvent.IsError] and [RunEvent.Duration] are set.
	RunToolFinished
	// RunModelUsage ends one model call: [RunEvent.Usage] is what it cost
	// ([Response.Usage]).
	RunModelUsage
)

// RunEvent is one thing that happened during a run, handed to the
// [Observer] of [RunObserved] as it happens.
type RunEvent struct {
	Kind RunEventKind
	// Delta of a RunDelta event.
	Delta Delta
	// ToolCallID and ToolName of a RunToolStarted or RunToolFinished event.
	ToolCallID, ToolName string
	// IsError and Duration of a RunToolFinished event: the call failed
	// ([ToolResult.IsError]); how long it ran.
	IsError  bool
	Duration time.Duration
	// Usage of a RunModelUsage event.
	Usage Usage
}

// Observer receives the events of a run ([RunObserved]). It is called
// from the run's own goroutine for deltas and usage, and from the tool
// calls' workers for tool events: concurrently when a turn's calls run in
// parallel (MaxParallelToolCalls), so it must be safe for concurrent use.
// It must not block: while it runs, the model's answer is not read. A
// consumer that hands events to a slower reader buffers and coalesces them
// itself (the Engine of the root package does: its per-run fan-out).
type Observer func(RunEvent)
