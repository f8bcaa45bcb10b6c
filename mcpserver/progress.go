package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// progressBuffer is the lattice buffer of one call's progress reporter. A
// burst of tool events beyond it costs progress messages, never the run.
const progressBuffer = 64

// reportProgress sends notifications/progress for the call with this token
// while the run goes: once when it starts, for each tool the run calls and
// finishes, and every ProgressInterval. stop ends the reporter and returns
// after its last notification, so none can follow the call's result.
func (s *Server) reportProgress(ctx context.Context, ss *mcp.ServerSession, token any, agentID, taskID string) (stop func()) {
	sub, err := s.engine.Bus().Subscribe(lattice.Filter{Types: []string{axocoatl.EventToolCalled, axocoatl.EventToolResult}}, progressBuffer)
	if err != nil {
		// A closed bus means a closing Engine: the run will fail on its own;
		// report what we can (the periodic beat) without tool events.
		s.log.Debug("progress without tool events", "error", err)
		sub = nil
	}
	// Notifications go out with the request's ctx: its values are how the
	// go-sdk routes them to the call's own HTTP stream, and it ends only
	// when the call is cancelled. finish says the run is over.
	finish := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var progress float64
		notify := func(msg string) {
			progress++
			err := ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Message: msg})
			if err != nil && ctx.Err() == nil {
				s.log.Debug("progress notification failed", "task", taskID, "error", err)
			}
		}
		notify(fmt.Sprintf("agent %s started task %s", agentID, taskID))

		var tick <-chan time.Time
		if s.cfg.ProgressInterval > 0 {
			t := time.NewTicker(s.cfg.ProgressInterval)
			defer t.Stop()
			tick = t.C
		}
		var events <-chan lattice.Event
		if sub != nil {
			events = sub.Events()
		}
		start := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-finish:
				// The run's events were published before it returned: they
				// are in the buffer already.
				for events != nil {
					select {
					case ev, ok := <-events:
						if !ok {
							return
						}
						if msg, mine := describeToolEvent(ev, taskID); mine {
							notify(msg)
						}
					default:
						return
					}
				}
				return
			case <-tick:
				notify(fmt.Sprintf("agent %s running for %s", agentID, time.Since(start).Round(time.Second)))
			case ev, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				if msg, mine := describeToolEvent(ev, taskID); mine {
					notify(msg)
				}
			}
		}
	}()
	return func() {
		close(finish)
		<-done
		if sub != nil {
			sub.Close()
		}
	}
}

// describeToolEvent turns a ToolCalled or ToolResult event of the task into a
// progress message; mine is false for other tasks' events.
func describeToolEvent(ev lattice.Event, taskID string) (msg string, mine bool) {
	var p struct {
		TaskID string `json:"task_id"`
		Tool   string `json:"tool"`
		OK     bool   `json:"ok"`
	}
	if err := json.Unmarshal(ev.Payload, &p); err != nil || p.TaskID != taskID {
		return "", false
	}
	switch {
	case ev.Type == axocoatl.EventToolCalled:
		return "calling tool " + p.Tool, true
	case p.OK:
		return "tool " + p.Tool + " done", true
	}
	return "tool " + p.Tool + " failed", true
}
