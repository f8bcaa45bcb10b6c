package axocoatl_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
)

// floodModel streams n copies of word once start is closed (nil: at
// once), then closes finished (if set) and answers with their sum.
type floodModel struct {
	n        int
	word     string
	start    chan struct{}
	finished chan struct{}
	usage    agent.Usage
}

func (m *floodModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	return m.GenerateStream(ctx, req, func(agent.Delta) {})
}

func (m *floodModel) GenerateStream(ctx context.Context, _ *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	if m.start != nil {
		select {
		case <-m.start:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	for range m.n {
		emit(agent.Delta{Kind: agent.DeltaText, Text: m.word})
	}
	if m.finished != nil {
		close(m.finished)
	}
	return &agent.Response{Content: strings.Repeat(m.word, m.n), Usage: m.usage}, nil
}

func TestOnEventGetsTheRunAsItHappens(t *testing.T) {
	e := newEngine(t)
	if err := e.AddAgent(agent.Spec{ID: "echo"}, provider.EchoModel{}); err != nil {
		t.Fatal(err)
	}
	events := subscribe(t, e, axocoatl.EventTaskCompleted)
	var text strings.Builder
	var usage agent.Usage
	deltas := 0
	res, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "echo", Input: "one two three four", OnEvent: func(ev agent.RunEvent) {
		switch ev.Kind {
		case agent.RunDelta:
			deltas++
			text.WriteString(ev.Delta.Text)
		case agent.RunModelUsage:
			usage = usage.Add(ev.Usage)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	// Every call returned before ExecuteRequest did: no lock needed.
	if text.String() != res.Output || deltas != 4 {
		t.Fatalf("deltas %d making %q, output %q", deltas, text.String(), res.Output)
	}
	if res.Usage.OutputTokens != 4 || res.Usage != usage {
		t.Fatalf("result usage %+v, events' %+v", res.Usage, usage)
	}
	_, p := next(t, events)
	u, _ := p["usage"].(map[string]any)
	if u["input_tokens"] != float64(res.Usage.InputTokens) || u["output_tokens"] != float64(4) || u["cached_input_tokens"] != float64(0) {
		t.Fatalf("TaskCompleted payload %v, result usage %+v", p, res.Usage)
	}
}

// The model's goroutine never waits for a listener: a door callback that
// blocks until the model has written its whole answer sees the run end.
// Guards: the 256 events queued for one listener and the 64 KiB of merged text.
func TestSlowOnEventDoesNotSlowTheModel(t *testing.T) {
	e := newEngine(t)
	m := &floodModel{n: 100_000, word: "word ", finished: make(chan struct{})}
	if err := e.AddAgent(agent.Spec{ID: "flood"}, m); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	calls := 0
	res, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "flood", Input: "go", OnEvent: func(ev agent.RunEvent) {
		if calls == 0 {
			select {
			case <-m.finished:
			case <-time.After(time.Minute):
				t.Error("the model did not finish while the listener was stuck: it waits for the listener")
			}
		}
		calls++
		got.WriteString(ev.Delta.Text)
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The stuck call's own event, a full queue, the coalesced text, and
	// the run's usage event, which finds room once the listener is let go
	// as the model finishes.
	if calls > 1+axocoatl.RunListenerBuffer+2 {
		t.Fatalf("%d calls for a listener stuck from the first: its queue holds at most %d events and one coalesced text", calls, axocoatl.RunListenerBuffer)
	}
	if n := got.Len(); n > (1+axocoatl.RunListenerBuffer)*len(m.word)+axocoatl.RunListenerTextBytes || n == 0 {
		t.Fatalf("%d bytes reached the stuck listener", n)
	}
	if !strings.HasPrefix(res.Output, got.String()) {
		t.Fatal("the text the listener got is not the start of the answer")
	}
}

// Guards: Options.MaxRunListeners and the 256 events queued for one listener.
func TestFollowRun(t *testing.T) {
	e := axocoatl.New(axocoatl.Options{MaxRunListeners: 2})
	defer e.Close(context.Background())
	m := &floodModel{n: 100_000, word: "0123456789", start: make(chan struct{})}
	if err := e.AddAgent(agent.Spec{ID: "flood"}, m); err != nil {
		t.Fatal(err)
	}
	if _, err := e.FollowRun(context.Background(), "nope"); !errors.Is(err, axocoatl.ErrTaskNotRunning) {
		t.Fatalf("unknown task: %v", err)
	}
	activated := subscribe(t, e, axocoatl.EventAgentActivated)
	done := make(chan error, 1)
	var res axocoatl.Result
	go func() {
		var err error
		res, err = e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "flood", Input: "go", TaskID: "t1", OnEvent: func(agent.RunEvent) {}})
		done <- err
	}()
	next(t, activated)
	// A caller whose agent globs leave the run's agent out is told the
	// task is not running, as for one that does not exist.
	other := axocoatl.WithIdentity(context.Background(), &axocoatl.Identity{Name: "other", Scopes: []axocoatl.Scope{axocoatl.ScopeRead}, Agents: []string{"notflood*"}})
	if _, err := e.FollowRun(other, "t1"); !errors.Is(err, axocoatl.ErrTaskNotRunning) {
		t.Fatalf("a caller who does not see agent flood followed its run: %v", err)
	}
	stuck, err := e.FollowRun(context.Background(), "t1") // never read until the run ended
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.FollowRun(context.Background(), "t1"); !errors.Is(err, axocoatl.ErrTooManyListeners) {
		t.Fatalf("third listener (OnEvent, stuck, this): %v", err)
	}
	close(m.start)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the run did not end while a listener was stuck")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events, bytes := 0, 0
	for {
		ev, err := stuck.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		events++
		bytes += len(ev.Delta.Text)
	}
	// 1 MB was written; the stuck listener held one ring and one bounded
	// coalesced text of it.
	if events > axocoatl.RunListenerBuffer+1 || bytes > axocoatl.RunListenerBuffer*10+axocoatl.RunListenerTextBytes {
		t.Fatalf("a stuck listener held %d events, %d bytes", events, bytes)
	}
	if stuck.Dropped() == 0 || stuck.Coalesced() == 0 {
		t.Fatalf("dropped %d, coalesced %d: 1 MB past the bounds", stuck.Dropped(), stuck.Coalesced())
	}
	if !strings.HasPrefix(res.Output, strings.Repeat("0123456789", 256)) {
		t.Fatal("output")
	}
	if _, err := e.FollowRun(context.Background(), "t1"); !errors.Is(err, axocoatl.ErrTaskNotRunning) {
		t.Fatalf("finished task: %v", err)
	}
	stuck.Close()
	stuck.Close()
	if _, err := stuck.Next(ctx); !errors.Is(err, axocoatl.ErrTaskNotRunning) {
		t.Fatalf("after Close: %v", err)
	}
}

// BenchmarkDeltaToDoor measures the path of one text delta from the
// model's emit to a door's Request.OnEvent, and fails past 4 allocations
// per delta (issue #26's bar).
func BenchmarkDeltaToDoor(b *testing.B) {
	const perRun = 10_000
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	if err := e.AddAgent(agent.Spec{ID: "flood"}, &floodModel{n: perRun, word: "tok "}); err != nil {
		b.Fatal(err)
	}
	got := 0
	onEvent := func(ev agent.RunEvent) { got += len(ev.Delta.Text) }
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "flood", Input: "go", OnEvent: onEvent}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	deltas := float64(b.N) * perRun
	allocs := float64(after.Mallocs-before.Mallocs) / deltas
	b.ReportMetric(allocs, "allocs/delta")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/deltas, "ns/delta")
	if got != b.N*perRun*4 {
		b.Fatalf("%d bytes reached the door, %d were written", got, b.N*perRun*4)
	}
	if allocs > 4 {
		b.Fatalf("%.2f allocations per delta, the bar is 4", allocs)
	}
}

// A door's callback that panics loses its events, not the process nor
// the run.
func TestOnEventPanicContained(t *testing.T) {
	e := newEngine(t)
	if err := e.AddAgent(agent.Spec{ID: "echo"}, provider.EchoModel{}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	res, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "echo", Input: "a b c d", OnEvent: func(agent.RunEvent) {
		calls++
		panic("door bug")
	}})
	if err != nil || res.Output != "a b c d" {
		t.Fatalf("%+v %v", res, err)
	}
	if calls != 1 {
		t.Fatalf("%d calls after the panic of the first", calls)
	}
}

// halfModel writes "a0 … a49 ", signals half, waits for gate, then
// writes "b0 … b49 ".
type halfModel struct{ half, gate chan struct{} }

func (m halfModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	return m.GenerateStream(ctx, req, func(agent.Delta) {})
}

func (m halfModel) GenerateStream(ctx context.Context, _ *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	var all strings.Builder
	for i := range 50 {
		w := "a" + strconv.Itoa(i) + " "
		all.WriteString(w)
		emit(agent.Delta{Kind: agent.DeltaText, Text: w})
	}
	close(m.half)
	select {
	case <-m.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for i := range 50 {
		w := "b" + strconv.Itoa(i) + " "
		all.WriteString(w)
		emit(agent.Delta{Kind: agent.DeltaText, Text: w})
	}
	return &agent.Response{Content: all.String()}, nil
}

func TestFollowRunFromWhereItJoins(t *testing.T) {
	e := newEngine(t)
	m := halfModel{half: make(chan struct{}), gate: make(chan struct{})}
	if err := e.AddAgent(agent.Spec{ID: "half"}, m); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		// A door follows the run from its start (its calls are streamed:
		// a run nobody follows asks for a plain answer), and another
		// listener joins halfway.
		_, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "half", Input: "go", TaskID: "t-half", OnEvent: func(agent.RunEvent) {}})
		done <- err
	}()
	select {
	case <-m.half:
	case <-time.After(time.Minute):
		t.Fatal("the model did not start")
	}
	sub, err := e.FollowRun(context.Background(), "t-half")
	if err != nil {
		t.Fatal(err)
	}
	close(m.gate)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var text strings.Builder
	usage := 0
	for {
		ev, err := sub.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(ev.Delta.Text)
		if ev.Kind == agent.RunModelUsage {
			usage++
		}
	}
	var want strings.Builder
	for i := range 50 {
		want.WriteString("b" + strconv.Itoa(i) + " ")
	}
	if text.String() != want.String() || usage != 1 {
		t.Fatalf("a follower that joined halfway got %q (%d usage events), want the second half", text.String(), usage)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// countingStreamer counts its streamed and plain calls.
type countingStreamer struct{ streamed, plain *atomic.Int32 }

func (m countingStreamer) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	m.plain.Add(1)
	return &agent.Response{Content: "plain"}, nil
}

func (m countingStreamer) GenerateStream(_ context.Context, _ *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	m.streamed.Add(1)
	emit(agent.Delta{Kind: agent.DeltaText, Text: "streamed"})
	return &agent.Response{Content: "streamed"}, nil
}

// A run nobody follows asks its model for a plain answer; one with a
// listener streams.
func TestOnlyFollowedRunsStream(t *testing.T) {
	e := newEngine(t)
	m := countingStreamer{streamed: new(atomic.Int32), plain: new(atomic.Int32)}
	if err := e.AddAgent(agent.Spec{ID: "s"}, m); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if r, err := e.Execute(ctx, "s", "x"); err != nil || r.Output != "plain" {
		t.Fatalf("%+v, %v", r, err)
	}
	var got strings.Builder
	r, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "s", Input: "x", OnEvent: func(ev agent.RunEvent) { got.WriteString(ev.Delta.Text) }})
	if err != nil || r.Output != "streamed" || got.String() != "streamed" {
		t.Fatalf("%+v, %v, deltas %q", r, err, got.String())
	}
	if m.plain.Load() != 1 || m.streamed.Load() != 1 {
		t.Fatalf("plain %d, streamed %d; want 1 each", m.plain.Load(), m.streamed.Load())
	}
}

// checkedModel streams n deltas "w ", each from goroutines of its own
// (one when goroutines is 1), and after each emit returns checks
// (through after) what the caller's observer has seen; Generate fails: a
// run with only an OnEventSync must stream too.
type checkedModel struct {
	n, goroutines int
	after         func(emitted int)
}

func (m *checkedModel) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return nil, errors.New("asked for a plain answer: the run has a listener, it should stream")
}

func (m *checkedModel) GenerateStream(_ context.Context, _ *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	done := make(chan struct{})
	for g := range m.goroutines {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range m.n / m.goroutines {
				emit(agent.Delta{Kind: agent.DeltaText, Text: "w "})
				if m.after != nil {
					m.after(g*(m.n/m.goroutines) + i + 1)
				}
			}
		}()
	}
	for range m.goroutines {
		<-done
	}
	return &agent.Response{Content: strings.Repeat("w ", m.n)}, nil
}

// OnEventSync is called on the model's goroutine as each delta is
// emitted: when emit returns, the observer has it (no hand-off, nothing
// coalesced), and it is not called after ExecuteRequest returns.
func TestOnEventSyncIsCalledAsTheModelEmits(t *testing.T) {
	e := newEngine(t)
	seen := 0 // the model's goroutine alone touches it
	var late atomic.Bool
	returned := false
	m := &checkedModel{n: 2000, goroutines: 1}
	m.after = func(emitted int) {
		if seen != emitted {
			t.Errorf("emit %d returned with %d deltas observed: the observer is not called as the model emits", emitted, seen)
			m.after = nil
		}
	}
	if err := e.AddAgent(agent.Spec{ID: "checked"}, m); err != nil {
		t.Fatal(err)
	}
	res, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "checked", Input: "go", OnEventSync: func(ev agent.RunEvent) {
		if returned {
			late.Store(true)
		}
		if ev.Kind == agent.RunDelta {
			seen++
		}
	}})
	returned = true
	if err != nil {
		t.Fatal(err)
	}
	if seen != 2000 || res.Output != strings.Repeat("w ", 2000) {
		t.Fatalf("%d deltas observed of 2000, output of %d bytes", seen, len(res.Output))
	}
	if late.Load() {
		t.Fatal("OnEventSync called after ExecuteRequest returned")
	}
}

// Events reported at once from several goroutines (a turn's parallel tool
// calls do) reach OnEventSync one at a time, every one of them.
func TestOnEventSyncOneCallAtATime(t *testing.T) {
	e := newEngine(t)
	if err := e.AddAgent(agent.Spec{ID: "checked"}, &checkedModel{n: 4000, goroutines: 4}); err != nil {
		t.Fatal(err)
	}
	var inside, overlaps atomic.Int32
	calls := 0 // safe if the calls are serialised: -race says otherwise
	_, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "checked", Input: "go", OnEventSync: func(ev agent.RunEvent) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		if ev.Kind == agent.RunDelta {
			calls++
			runtime.Gosched() // widen the window another call would enter
		}
		inside.Add(-1)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("%d calls of OnEventSync overlapped another", n)
	}
	if calls != 4000 {
		t.Fatalf("%d deltas observed of 4000", calls)
	}
}

// A panic of OnEventSync (a door's code, on the model's goroutine) ends
// its calls, not the run, and leaves the fan-out usable: a FollowRun
// listener still gets the rest.
func TestOnEventSyncPanicContained(t *testing.T) {
	e := newEngine(t)
	if err := e.AddAgent(agent.Spec{ID: "echo"}, provider.EchoModel{}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	var other strings.Builder
	res, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "echo", Input: "a b c d",
		OnEvent: func(ev agent.RunEvent) { other.WriteString(ev.Delta.Text) },
		OnEventSync: func(agent.RunEvent) {
			calls++
			panic("door bug")
		}})
	if err != nil || res.Output != "a b c d" {
		t.Fatalf("%+v %v", res, err)
	}
	if calls != 1 {
		t.Fatalf("%d calls after the panic of the first", calls)
	}
	if other.String() != res.Output {
		t.Fatalf("the OnEvent beside it got %q, want %q", other.String(), res.Output)
	}
}
