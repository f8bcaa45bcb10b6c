package lattice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustEvent(t testing.TB, typ string, payload any) Event {
	t.Helper()
	ev, err := New(typ, "test", payload)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// One publisher, eight subscribers, one stalled: the seven readers get every
// event in order, the stalled one reports exactly what it missed.
//
// Guards: bound "events buffered per subscriber" (lattice and cluster) (docs/bounds.md).
func TestSlowSubscriberMissesWithoutBlockingOthers(t *testing.T) {
	bus := NewMemory()
	defer bus.Close()
	const n, buffer = 5000, 16
	var readers []Subscription
	for range 7 {
		s, err := bus.Subscribe(Filter{}, n)
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, s)
	}
	stalled, err := bus.Subscribe(Filter{}, buffer)
	if err != nil {
		t.Fatal(err)
	}

	type result struct {
		got int
		err error
	}
	done := make(chan result, len(readers))
	for _, s := range readers {
		go func() {
			want := 0
			for ev := range s.Events() {
				var p struct{ N int }
				if err := json.Unmarshal(ev.Payload, &p); err != nil || p.N != want {
					done <- result{want, fmt.Errorf("event %d: got payload %s (%v)", want, ev.Payload, err)}
					return
				}
				if want++; want == n {
					break
				}
			}
			done <- result{want, nil}
		}()
	}
	start := time.Now()
	for i := range n {
		if err := bus.Publish(context.Background(), mustEvent(t, "Tick", map[string]int{"n": i})); err != nil {
			t.Fatal(err)
		}
	}
	for range readers {
		r := <-done
		if r.err != nil || r.got != n {
			t.Fatalf("reader got %d/%d: %v", r.got, n, r.err)
		}
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Fatalf("publishing took %s: the stalled subscriber slowed the others", elapsed)
	}
	if got := stalled.Missed(); got != n-buffer {
		t.Fatalf("stalled subscriber: Missed() = %d, want %d", got, n-buffer)
	}
	// What it did buffer are the first events, in order.
	for i := range buffer {
		ev := <-stalled.Events()
		var p struct{ N int }
		json.Unmarshal(ev.Payload, &p)
		if p.N != i {
			t.Fatalf("stalled buffer[%d] = %d", i, p.N)
		}
	}
}

func TestFilters(t *testing.T) {
	const tel = ClassTelemetry // a class the publisher declared
	cases := []struct {
		f     Filter
		typ   string
		class Class
		match bool
	}{
		{Filter{}, "Anything", 0, true},
		{Filter{}, "Anything", tel, true},
		{Filter{Types: []string{"JobDone"}}, "JobDone", 0, true},
		{Filter{Types: []string{"JobDone"}}, "JobLost", 0, false},
		{Filter{Types: []string{"Step*"}}, "StepBegun", tel, true},
		{Filter{Types: []string{"Step*"}}, "JobDone", 0, false},
		{Filter{Class: ClassCoordination}, "JobDone", 0, true},
		{Filter{Class: ClassCoordination}, "JobDone", ClassCoordination, true},
		{Filter{Class: ClassCoordination}, "MyCustomEvent", 0, true},
		{Filter{Class: ClassCoordination}, "StepBegun", tel, false},
		{Filter{Class: ClassTelemetry}, "Started", tel, true},
		{Filter{Class: ClassTelemetry}, "JobLost", 0, false},
		{Filter{Class: ClassTelemetry}, "JobLost", ClassCoordination, false},
		{Filter{Class: ClassTelemetry, Types: []string{"Step*"}}, "StepEnded", tel, true},
		{Filter{Class: ClassCoordination, Types: []string{"Step*"}}, "StepEnded", tel, false},
		{Filter{Types: []string{"JobLost", "S?ep[BE]*"}}, "StepEnded", tel, true},
		{Filter{Types: []string{"JobLost", "JobDone"}}, "StepEnded", tel, false},
		{Filter{Types: []string{`Odd\*`}}, "Odd*", 0, true},
		{Filter{Types: []string{`Odd\*`}}, "OddX", 0, false},
	}
	bus := NewMemory()
	defer bus.Close()
	for _, c := range cases {
		ev := mustEvent(t, c.typ, nil)
		ev.Class = c.class
		if got := c.f.Match(ev); got != c.match {
			t.Errorf("%+v.Match(%q, %s) = %v, want %v", c.f, c.typ, c.class, got, c.match)
		}
		// And through a real subscription.
		s, err := bus.Subscribe(c.f, 4)
		if err != nil {
			t.Fatal(err)
		}
		bus.Publish(context.Background(), ev)
		select {
		case <-s.Events():
			if !c.match {
				t.Errorf("%+v delivered %q (%s)", c.f, c.typ, c.class)
			}
		default:
			if c.match {
				t.Errorf("%+v did not deliver %q (%s)", c.f, c.typ, c.class)
			}
		}
		s.Close()
	}
	if _, err := bus.Subscribe(Filter{Types: []string{"["}}, 1); err == nil {
		t.Error("a malformed glob was accepted")
	}
}

func TestCloseSemantics(t *testing.T) {
	bus := NewMemory()
	s, _ := bus.Subscribe(Filter{}, 1)
	s2, _ := bus.Subscribe(Filter{}, 1)
	s2.Close()
	s2.Close() // idempotent
	if _, ok := <-s2.Events(); ok {
		t.Fatal("unsubscribed channel still open")
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-s.Events(); ok {
		t.Fatal("subscription channel open after bus Close")
	}
	s.Close() // after bus close: no panic
	if err := bus.Publish(context.Background(), mustEvent(t, "X", nil)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close = %v, want ErrClosed", err)
	}
	if _, err := bus.Subscribe(Filter{}, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Close = %v, want ErrClosed", err)
	}
}

func TestIDsUniqueAndTimeOrdered(t *testing.T) {
	const n = 100000
	seen := make(map[string]bool, n)
	prev := ""
	now := time.Now()
	for i := range n {
		id := NewID(now) // same millisecond: the counter must keep order
		if i%1000 == 0 {
			now = time.Now()
		}
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		if id <= prev {
			t.Fatalf("id %s not after %s", id, prev)
		}
		if id[14] != '7' {
			t.Fatalf("id %s is not UUIDv7", id)
		}
		seen[id], prev = true, id
	}
}

func TestEventWireShapeAndValidation(t *testing.T) {
	ev := mustEvent(t, "JobDone", map[string]string{"agent_id": "a"})
	ev.Class = ClassTelemetry
	raw, _ := json.Marshal(ev)
	var m map[string]any
	json.Unmarshal(raw, &m)
	for _, k := range []string{"id", "type", "produced_by", "timestamp", "payload"} {
		if _, ok := m[k]; !ok {
			t.Errorf("wire form lacks %q: %s", k, raw)
		}
	}
	// The class travels beside the event, never in its JSON form.
	if len(m) != 5 {
		t.Errorf("wire form has more than the contract's five members: %s", raw)
	}
	if string(ev.AppendJSON(nil)) != string(raw) {
		t.Errorf("AppendJSON %s, json.Marshal %s", ev.AppendJSON(nil), raw)
	}
	if _, err := New("X", "t", []int{1}); err == nil {
		t.Error("array payload accepted")
	}
	if _, err := New("X", "t", json.RawMessage(`"s"`)); err == nil {
		t.Error("string payload accepted")
	}
	if e := (Event{Type: ""}); e.Validate() == nil {
		t.Error("empty type accepted")
	}
	if e := (Event{Type: "X", Payload: json.RawMessage(`[1]`)}); e.Validate() == nil {
		t.Error("array payload accepted by Validate")
	}
}

// On the in-memory bus every event is local: a Local filter changes nothing.
func TestMemoryLocalFilterSeesEverything(t *testing.T) {
	b := NewMemory()
	defer b.Close()
	s, err := b.Subscribe(Filter{Local: true}, 4)
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := New("JobDone", "a", nil)
	if err := b.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if got := <-s.Events(); got.ID != ev.ID {
		t.Fatalf("got %v", got)
	}
}

// AppendJSON decodes to the same event as json.Marshal's encoding, for
// ids, types and producers with quotes, control characters, invalid UTF-8
// and non-ASCII text, and payloads with whitespace or none.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	strs := []string{"", "plain", `q"uo\te`, "ctl\x00\x01\n\t\x1f", "bad\xff\xfeutf8", "ünïcødé ✓ 𝄞", "<html>&amp;", "\u2028\u2029"}
	payloads := []string{"", `{}`, `{"a": 1, "b": [true, null, "x"]}`, "{\n  \"k\": \"v\"\n}"}
	for _, s := range strs {
		for _, p := range payloads {
			ev := Event{ID: s, Type: "T" + s, ProducedBy: s + "p", Timestamp: -12345}
			if p != "" {
				ev.Payload = json.RawMessage(p)
			}
			got := ev.AppendJSON(nil)
			if !json.Valid(got) {
				t.Fatalf("AppendJSON(%q, %q) = %s: not valid JSON", s, p, got)
			}
			want, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			var a, b Event
			if err := json.Unmarshal(got, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(want, &b); err != nil {
				t.Fatal(err)
			}
			if a.ID != b.ID || a.Type != b.Type || a.ProducedBy != b.ProducedBy || a.Timestamp != b.Timestamp {
				t.Fatalf("AppendJSON decodes to %+v, json.Marshal to %+v", a, b)
			}
			var pa, pb any
			_ = json.Unmarshal(a.Payload, &pa)
			_ = json.Unmarshal(b.Payload, &pb)
			if fmt.Sprint(pa) != fmt.Sprint(pb) {
				t.Fatalf("payloads differ: %s vs %s", a.Payload, b.Payload)
			}
		}
	}
}

// An id tells when it was made, to the millisecond; a string that is not
// one of ours says so.
func TestIDTime(t *testing.T) {
	// ids never go back in time (another test may have made one later
	// than a fixed instant): take the clock's.
	// And a burst of ids (over 4,096 in a millisecond: another test's)
	// borrows the next milliseconds, so an id may be as far ahead of the
	// clock as the last one made, and one more, never further.
	ids.mu.Lock()
	lastMS := ids.lastMS
	ids.mu.Unlock()
	before := time.Now().Truncate(time.Millisecond)
	got, ok := IDTime(NewID(time.Now()))
	after := time.Now()
	limit := after
	if borrowed := time.UnixMilli(lastMS + 1); borrowed.After(limit) {
		limit = borrowed
	}
	if !ok || got.Before(before) || got.After(limit) {
		t.Fatalf("IDTime = %v %v, want within [%v, %v]", got, ok, before, limit)
	}
	if got.Nanosecond()%int(time.Millisecond) != 0 {
		t.Fatalf("IDTime %v finer than the millisecond an id holds", got)
	}
	ev, _ := New("X", "test", nil)
	if got, ok := IDTime(ev.ID); !ok || got.Unix() != ev.Timestamp {
		t.Fatalf("event %s at %d: IDTime %v %v", ev.ID, ev.Timestamp, got, ok)
	}
	for _, bad := range []string{"", "h1", "0190d3e4-8c5a-4b2e-9f00-000000000000", "zz90d3e4-8c5a-7b2e-9f00-000000000000", NewID(time.Now()) + "x"} {
		if _, ok := IDTime(bad); ok {
			t.Errorf("IDTime(%q) ok", bad)
		}
	}
}
