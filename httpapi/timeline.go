package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// Bounds of the run timelines (GET /api/runs/{id}/timeline).
const (
	// DefaultTimelineRuns is how many runs' timelines are kept: the
	// latest started; the oldest is forgotten when another begins.
	DefaultTimelineRuns = 200
	// DefaultTimelineRows bounds the rows one run's timeline keeps from
	// its events (model calls, tool calls, approval waits); rows past it
	// are counted in "dropped", the run's own start and end are always
	// kept. Its webhook deliveries are bounded by the same number again.
	DefaultTimelineRows = 256
)

// Lengths of the texts a timeline row keeps (bytes, cut on a UTF-8
// boundary): names, who resolved an approval, and error messages.
const (
	timelineNameBytes  = 128
	timelineErrorBytes = 512
)

// Timeline connects the run timelines to what other modules record. Its
// zero value shows a run's model calls, tool calls and outcome (the
// Engine's own events) and no approval waits or webhook deliveries.
type Timeline struct {
	// ApprovalRequested and ApprovalResolved are the event types of the
	// approval gate (approval.EventRequested and approval.EventResolved):
	// a run's approval waits, and who resolved each, come from them.
	// Zero: no approval rows.
	ApprovalRequested, ApprovalResolved string
	// Deliveries returns the webhook deliveries of the given events (at
	// most limit), with their attempts: the rows of the webhooks a run's
	// events caused (egress's Module.DeliveriesOf). It must not block on
	// the network. They are shown only to a caller with the admin scope,
	// as the webhook routes are. Zero: no webhook rows.
	Deliveries func(ctx context.Context, eventIDs []string, limit int) []WebhookDelivery
}

// WebhookDelivery is one event on its way to one webhook, as a run's
// timeline shows it.
type WebhookDelivery struct {
	Webhook   string
	EventType string
	// Status: queued, in_flight, delivered, failed or dead_lettered.
	Status    string
	CreatedAt time.Time
	Attempts  []WebhookAttempt
}

// WebhookAttempt is one try of a [WebhookDelivery].
type WebhookAttempt struct {
	// Start is when the request was made; Latency how long until its
	// answer (or its failure).
	Start      time.Time
	StatusCode int // 0: no response
	Latency    time.Duration
	Error      string
}

// TimelineResponse is the answer of GET /api/runs/{id}/timeline: one run
// as rows a waterfall draws, each placed by its offset from the run's
// start.
type TimelineResponse struct {
	TaskID  string `json:"task_id"`
	AgentID string `json:"agent_id"`
	Source  string `json:"source,omitempty"`
	Model   string `json:"model,omitempty"`
	// Status: running, completed, failed or canceled.
	Status    string    `json:"status"`
	Error     string    `json:"error,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// DurationMS is the run's, so far while it runs.
	DurationMS float64      `json:"duration_ms"`
	Usage      *agent.Usage `json:"usage,omitempty"`
	// Rows are the run itself, then its model calls, tool calls, approval
	// waits and webhook deliveries by start.
	Rows []TimelineRow `json:"rows"`
	// Dropped counts rows past the bound of one timeline, not kept.
	Dropped int `json:"dropped,omitempty"`
	// Missed counts events every timeline missed since the daemon
	// started (the lattice dropped them for a reader that fell behind):
	// when not zero, a timeline may lack rows.
	Missed uint64 `json:"missed,omitempty"`
}

// TimelineRow is one span of a run: like a trace's span, without tracing.
type TimelineRow struct {
	// Kind: run, model, tool, approval, question (a tool's server asked
	// the user) or webhook.
	Kind string `json:"kind"`
	// Name: the agent (run), "chat <model>" (model), the tool (tool,
	// approval, question), the webhook (webhook).
	Name string `json:"name"`
	// StartMS is the offset from the run's start; DurationMS its length,
	// so far while it lasts (status running or waiting).
	StartMS    float64 `json:"start_ms"`
	DurationMS float64 `json:"duration_ms"`
	// Tokens a model call (or the whole run) used.
	Tokens *agent.Usage `json:"tokens,omitempty"`
	// Status: ok or error (model, tool); running; waiting, approved,
	// denied, expired, … (approval); queued, in_flight, delivered, failed,
	// dead_lettered (webhook); the run's own.
	Status string `json:"status"`
	// By is who resolved an approval, and how ("http:alice").
	By    string `json:"by,omitempty"`
	Error string `json:"error,omitempty"`
	// Detail: a model call's finish reason, a delivery's event type.
	Detail string `json:"detail,omitempty"`
	// Attempts of a webhook delivery, placed as the row is.
	Attempts []TimelineAttempt `json:"attempts,omitempty"`
}

// TimelineAttempt is one try of a webhook delivery.
type TimelineAttempt struct {
	StartMS    float64 `json:"start_ms"`
	DurationMS float64 `json:"duration_ms"`
	StatusCode int     `json:"status_code"`
	Error      string  `json:"error,omitempty"`
}

// timelines keeps the latest runs' timelines, built from their lattice
// events by one subscriber goroutine, which Close ends.
type timelines struct {
	sub                 lattice.Subscription
	done                chan struct{}
	maxRuns, maxRows    int
	requested, resolved string

	mu    sync.Mutex
	runs  map[string]*runRecord
	order []string // task ids, oldest first
}

// runRecord is one run's timeline as its events tell it.
type runRecord struct {
	task, agent, source, model string
	start                      time.Time // AgentActivated; zero if missed
	// activated: the run's AgentActivated was seen (a tool call made
	// outside a run, Engine.CallTool with a task id, has none).
	activated   bool
	end         time.Time
	status, err string
	durationMS  int64
	usage       *agent.Usage
	rows        []rec
	dropped     int
	// events are the ids of the run's events (bounded as rows are), for
	// the webhook deliveries they caused; endEvent is kept apart.
	events   []string
	endEvent string
}

// rec is a row as kept: absolute times; end zero while open.
type rec struct {
	kind, name, status, by, err, detail string
	approvalID                          string
	start, end                          time.Time
	tokens                              *agent.Usage
}

// timelinePayload holds the members of every event a timeline reads.
type timelinePayload struct {
	AgentID      string       `json:"agent_id"`
	TaskID       string       `json:"task_id"`
	Source       string       `json:"source"`
	Tool         string       `json:"tool"`
	Model        string       `json:"model"`
	OK           *bool        `json:"ok"`
	Error        string       `json:"error"`
	FinishReason string       `json:"finish_reason"`
	DurationMS   int64        `json:"duration_ms"`
	Usage        *agent.Usage `json:"usage"`
	Canceled     bool         `json:"canceled"`
	ApprovalID   string       `json:"approval_id"`
	Kind         string       `json:"kind"`
	Status       string       `json:"status"`
	ResolvedBy   string       `json:"resolved_by"`
	RequestedAt  time.Time    `json:"requested_at"`
	ResolvedAt   time.Time    `json:"resolved_at"`
}

func newTimelines(bus lattice.Bus, maxRuns, maxRows int, src Timeline) (*timelines, error) {
	types := []string{axocoatl.EventAgentActivated, axocoatl.EventModelResult, axocoatl.EventToolCalled,
		axocoatl.EventToolResult, axocoatl.EventTaskCompleted, axocoatl.EventAgentFailed}
	for _, t := range []string{src.ApprovalRequested, src.ApprovalResolved} {
		if t != "" {
			types = append(types, t)
		}
	}
	// Every daemon's runs (Local false), as the event stream shows them.
	sub, err := bus.Subscribe(lattice.Filter{Types: types}, 4*lattice.DefaultBuffer)
	if err != nil {
		return nil, err
	}
	tl := &timelines{sub: sub, done: make(chan struct{}), maxRuns: maxRuns, maxRows: maxRows,
		requested: src.ApprovalRequested, resolved: src.ApprovalResolved, runs: make(map[string]*runRecord)}
	go tl.run()
	return tl, nil
}

func (tl *timelines) run() {
	defer close(tl.done)
	for ev := range tl.sub.Events() {
		tl.add(ev)
	}
}

// Close ends the subscriber and waits for it.
func (tl *timelines) Close() {
	tl.sub.Close()
	<-tl.done
}

// eventTime is when an event was made, to the millisecond its id holds,
// else its timestamp's second.
func eventTime(ev lattice.Event) time.Time {
	if t, ok := lattice.IDTime(ev.ID); ok {
		return t
	}
	return time.Unix(ev.Timestamp, 0)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// add takes one event into its run's timeline.
func (tl *timelines) add(ev lattice.Event) {
	var p timelinePayload
	if json.Unmarshal(ev.Payload, &p) != nil || p.TaskID == "" {
		return
	}
	at := eventTime(ev)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	r := tl.runs[p.TaskID]
	if r == nil {
		r = &runRecord{task: clip(p.TaskID, timelineNameBytes), status: "running"}
		tl.runs[p.TaskID] = r
		tl.order = append(tl.order, p.TaskID)
		for len(tl.order) > tl.maxRuns {
			delete(tl.runs, tl.order[0])
			tl.order[0] = ""
			tl.order = tl.order[1:]
		}
	}
	if r.agent == "" && p.AgentID != "" {
		r.agent = clip(p.AgentID, timelineNameBytes)
	}
	if p.Model != "" {
		r.model = clip(p.Model, timelineNameBytes)
	}
	if len(r.events) < tl.maxRows {
		r.events = append(r.events, ev.ID)
	}
	switch ev.Type {
	case axocoatl.EventAgentActivated:
		r.start, r.activated = at, true
		r.source = clip(p.Source, timelineNameBytes)
	case axocoatl.EventTaskCompleted, axocoatl.EventAgentFailed:
		r.end, r.durationMS, r.usage, r.endEvent = at, p.DurationMS, p.Usage, ev.ID
		r.status = "completed"
		if ev.Type == axocoatl.EventAgentFailed {
			r.status, r.err = "failed", clip(p.Error, timelineErrorBytes)
			if p.Canceled {
				r.status = "canceled"
			}
		}
		if r.start.IsZero() {
			r.start = at.Add(-time.Duration(p.DurationMS) * time.Millisecond)
		}
	case axocoatl.EventModelResult:
		name := "chat"
		if p.Model != "" {
			name += " " + p.Model
		}
		row := rec{kind: "model", name: clip(name, timelineNameBytes), status: okStatus(p.OK), err: clip(p.Error, timelineErrorBytes),
			detail: clip(p.FinishReason, timelineNameBytes), start: at.Add(-time.Duration(p.DurationMS) * time.Millisecond), end: at, tokens: p.Usage}
		tl.addRow(r, row)
	case axocoatl.EventToolCalled:
		tl.addRow(r, rec{kind: "tool", name: clip(p.Tool, timelineNameBytes), status: "running", start: at})
	case axocoatl.EventToolResult:
		name := clip(p.Tool, timelineNameBytes)
		// The oldest open call of the tool: calls of one tool in parallel
		// end in any order, but each ToolResult says how long it ran.
		i := slices.IndexFunc(r.rows, func(x rec) bool { return x.kind == "tool" && x.name == name && x.end.IsZero() })
		start := at.Add(-time.Duration(p.DurationMS) * time.Millisecond)
		if i < 0 {
			tl.addRow(r, rec{kind: "tool", name: name, start: start})
			if i = len(r.rows) - 1; i < 0 || r.rows[i].name != name || !r.rows[i].end.IsZero() {
				return // past the bound
			}
		}
		row := &r.rows[i]
		row.end, row.status, row.err = at, okStatus(p.OK), clip(p.Error, timelineErrorBytes)
		if start.Before(row.start) {
			row.start = start
		}
	case tl.requested: // never "" here: an event has a type
		kind := "approval"
		if p.Kind == "question" {
			kind = "question"
		}
		start := p.RequestedAt
		if start.IsZero() {
			start = at
		}
		tl.addRow(r, rec{kind: kind, name: clip(p.Tool, timelineNameBytes), status: "waiting", approvalID: p.ApprovalID, start: start})
	case tl.resolved:
		end := p.ResolvedAt
		if end.IsZero() {
			end = at
		}
		i := slices.IndexFunc(r.rows, func(x rec) bool { return x.approvalID != "" && x.approvalID == p.ApprovalID })
		if i < 0 {
			kind := "approval"
			if p.Kind == "question" {
				kind = "question"
			}
			tl.addRow(r, rec{kind: kind, name: clip(p.Tool, timelineNameBytes), approvalID: p.ApprovalID, start: end})
			if i = len(r.rows) - 1; i < 0 || r.rows[i].approvalID != p.ApprovalID {
				return
			}
		}
		row := &r.rows[i]
		row.end, row.status, row.by = end, clip(p.Status, timelineNameBytes), clip(p.ResolvedBy, timelineNameBytes)
	}
}

func okStatus(ok *bool) string {
	if ok != nil && !*ok {
		return "error"
	}
	return "ok"
}

// addRow appends a row unless the run has its bound of rows already.
func (tl *timelines) addRow(r *runRecord, row rec) {
	if len(r.rows) >= tl.maxRows {
		r.dropped++
		return
	}
	r.rows = append(r.rows, row)
}

// snapshot copies a run's record (nil: not kept).
func (tl *timelines) snapshot(task string) *runRecord {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	r := tl.runs[task]
	if r == nil {
		return nil
	}
	c := *r
	c.rows = slices.Clone(r.rows)
	c.events = slices.Clone(r.events)
	return &c
}

// timeline builds the answer for one run; deliveries are its webhook
// deliveries (nil: none shown).
func (r *runRecord) timeline(now time.Time, deliveries []WebhookDelivery) TimelineResponse {
	base := r.start
	if base.IsZero() { // AgentActivated missed: the earliest row
		for _, x := range r.rows {
			if base.IsZero() || x.start.Before(base) {
				base = x.start
			}
		}
		if base.IsZero() {
			base = now
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	span := func(start, end time.Time) (float64, float64) {
		if end.IsZero() {
			end = now
		}
		return ms(start.Sub(base)), ms(max(end.Sub(start), 0))
	}
	out := TimelineResponse{TaskID: r.task, AgentID: r.agent, Source: r.source, Model: r.model,
		Status: r.status, Error: r.err, StartedAt: base, Usage: r.usage, Dropped: r.dropped}
	runEnd := r.end
	if runEnd.IsZero() {
		out.DurationMS = ms(now.Sub(base))
	} else {
		out.DurationMS = float64(r.durationMS)
	}
	run := TimelineRow{Kind: "run", Name: r.agent, Status: r.status, Error: r.err, Tokens: r.usage, DurationMS: out.DurationMS}
	rows := make([]TimelineRow, 0, len(r.rows)+len(deliveries)+2)
	open, lastEnd := false, base
	for _, x := range r.rows {
		row := TimelineRow{Kind: x.kind, Name: x.name, Status: x.status, By: x.by, Error: x.err, Detail: x.detail, Tokens: x.tokens}
		if x.end.IsZero() && !runEnd.IsZero() {
			x.end = runEnd // the run ended without its end (a missed event)
		}
		row.StartMS, row.DurationMS = span(x.start, x.end)
		if x.end.IsZero() {
			open = true
		} else if x.end.After(lastEnd) {
			lastEnd = x.end
		}
		rows = append(rows, row)
	}
	if r.status == "running" && r.activated && !open {
		// Between the end of the last call and now the run loop is
		// waiting on its model: the call that will end in a ModelResult.
		name := "chat"
		if r.model != "" {
			name += " " + r.model
		}
		row := TimelineRow{Kind: "model", Name: name, Status: "running"}
		row.StartMS, row.DurationMS = span(lastEnd, time.Time{})
		rows = append(rows, row)
	}
	for _, d := range deliveries {
		row := TimelineRow{Kind: "webhook", Name: clip(d.Webhook, timelineNameBytes), Status: d.Status, Detail: clip(d.EventType, timelineNameBytes)}
		end := time.Time{}
		final := d.Status != "queued" && d.Status != "in_flight"
		for _, a := range d.Attempts {
			ta := TimelineAttempt{StatusCode: a.StatusCode, Error: clip(a.Error, timelineErrorBytes)}
			ta.StartMS, ta.DurationMS = span(a.Start, a.Start.Add(a.Latency))
			row.Attempts = append(row.Attempts, ta)
			if e := a.Start.Add(a.Latency); e.After(end) {
				end = e
			}
		}
		switch {
		case !final:
			end = time.Time{} // still going: up to now
		case end.IsZero():
			end = d.CreatedAt // ended with no attempt
		}
		if n := len(d.Attempts); n > 0 && d.Attempts[n-1].Error != "" {
			row.Error = clip(d.Attempts[n-1].Error, timelineErrorBytes)
		}
		row.StartMS, row.DurationMS = span(d.CreatedAt, end)
		rows = append(rows, row)
	}
	// sort.Slice, not slices.SortFunc: one sorter for every element type,
	// where slices.SortFunc compiles ~20 KB per struct type into the daemon
	// (its size bound: bench/README.md).
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].StartMS < rows[j].StartMS })
	out.Rows = append([]TimelineRow{run}, rows...)
	return out
}

// getTimeline answers GET /api/runs/{id}/timeline.
func (m *Module) getTimeline(w http.ResponseWriter, r *http.Request) {
	task := r.PathValue("id")
	run := m.timelines.snapshot(task)
	who := axocoatl.IdentityFrom(r.Context())
	if run == nil || !who.SeesAgent(run.agent) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no timeline of task %q: unknown, or not among the last %d runs", clip(task, timelineNameBytes), m.timelines.maxRuns))
		return
	}
	var deliveries []WebhookDelivery
	if src := m.cfg.Timeline.Deliveries; src != nil && who.Can(axocoatl.ScopeAdmin) {
		ids := run.events
		if run.endEvent != "" && !slices.Contains(ids, run.endEvent) {
			ids = append(ids, run.endEvent)
		}
		deliveries = src(r.Context(), ids, m.timelines.maxRows)
		if len(deliveries) > m.timelines.maxRows {
			deliveries = deliveries[:m.timelines.maxRows]
		}
	}
	out := run.timeline(time.Now(), deliveries)
	out.Missed = m.timelines.sub.Missed()
	writeJSON(w, http.StatusOK, out)
}
