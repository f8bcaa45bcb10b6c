package axocoatl_test

import (
	"context"
	"strings"
	"testing"

	natsgo "github.com/nats-io/nats.go"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// declarer is a module that only declares event classes.
type declarer struct {
	name   string
	events map[string]lattice.Class
}

func (d declarer) Name() string                                  { return d.name }
func (d declarer) Start(context.Context, *axocoatl.Engine) error { return nil }
func (d declarer) Stop(context.Context) error                    { return nil }
func (d declarer) Events() map[string]lattice.Class              { return d.events }

// A module's declared classes reach subscribers' class filters through
// Engine.Publish; an undeclared type is coordination; a type declared twice
// with two classes, a type of the Engine's own and a class that is not one
// are refused before the module starts.
func TestModuleDeclaresEventClasses(t *testing.T) {
	e := newEngine(t)
	tel, err := e.Bus().Subscribe(lattice.Filter{Class: lattice.ClassTelemetry}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	coord, err := e.Bus().Subscribe(lattice.Filter{Class: lattice.ClassCoordination}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close()
	if err := e.Use(context.Background(), declarer{"a", map[string]lattice.Class{"Heartbeat": lattice.ClassTelemetry, "Deployed": lattice.ClassCoordination}}); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"Heartbeat", "Deployed", "Undeclared", axocoatl.EventToolCalled} {
		if err := e.Publish(context.Background(), typ, "test", nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"Heartbeat", axocoatl.EventToolCalled} {
		if ev, _ := next(t, tel); ev.Type != want || ev.Class != lattice.ClassTelemetry {
			t.Fatalf("telemetry subscriber got %s (%s), want %s", ev.Type, ev.Class, want)
		}
	}
	for _, want := range []string{"Deployed", "Undeclared"} {
		if ev, _ := next(t, coord); ev.Type != want {
			t.Fatalf("coordination subscriber got %s, want %s", ev.Type, want)
		}
	}
	if c := e.ClassOf(axocoatl.EventTaskCompleted); c != lattice.ClassCoordination {
		t.Errorf("ClassOf(TaskCompleted) = %s", c)
	}

	for _, c := range []struct {
		events map[string]lattice.Class
		err    string
	}{
		{map[string]lattice.Class{"Heartbeat": lattice.ClassCoordination}, "module b: event Heartbeat: declared coordination, already declared telemetry by another module"},
		{map[string]lattice.Class{axocoatl.EventAgentActivated: lattice.ClassTelemetry}, "module b: event AgentActivated: the Engine's own event type"},
		{map[string]lattice.Class{"Odd": lattice.ClassAny}, "module b: event Odd: class any: must be coordination or telemetry"},
	} {
		err := e.Use(context.Background(), declarer{"b", c.events})
		if err == nil || err.Error() != c.err {
			t.Errorf("Use(%v) = %v, want %q", c.events, err, c.err)
		}
	}
	// The same class again (a second module of the same kind) is fine.
	if err := e.Use(context.Background(), declarer{"c", map[string]lattice.Class{"Heartbeat": lattice.ClassTelemetry}}); err != nil {
		t.Fatal(err)
	}
}

// An Engine on the NATS lattice: its events reach a subscriber in another
// "process" (a second connection) on the same server, each with its class,
// which the JSON form does not carry.
func TestEngineOnNATS(t *testing.T) {
	ns := testutil.NATSServer(t, testutil.FreeAddr(t), "")
	connect := func() *latticenats.Bus {
		b, err := latticenats.Connect("", latticenats.Options{}, natsgo.InProcessServer(ns))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	engineBus, watcher := connect(), connect()
	done, _ := watcher.Subscribe(lattice.Filter{Types: []string{axocoatl.EventTaskCompleted}}, 10)
	tel, _ := watcher.Subscribe(lattice.Filter{Class: lattice.ClassTelemetry}, 10)
	coord, _ := watcher.Subscribe(lattice.Filter{Class: lattice.ClassCoordination}, 10)

	e := axocoatl.New(axocoatl.Options{Bus: engineBus})
	defer e.Close(context.Background())
	if err := e.AddAgent(agent.Spec{ID: "assistant"}, provider.EchoModel{}); err != nil {
		t.Fatal(err)
	}
	res, err := e.Execute(context.Background(), "assistant", "over nats")
	if err != nil {
		t.Fatal(err)
	}
	ev, p := next(t, done)
	if p["task_id"] != res.TaskID || p["output"] != "over nats" {
		t.Fatalf("TaskCompleted payload %s", ev.Payload)
	}
	// Events arrive in publish order: AgentActivated, ModelResult,
	// TaskCompleted, then the ToolCalled published now. The telemetry
	// filter passes all but TaskCompleted, the coordination filter that
	// one.
	if err := e.Publish(context.Background(), axocoatl.EventToolCalled, "test", nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 3 {
		ev, _ := next(t, tel)
		got = append(got, ev.Type+"/"+ev.Class.String())
	}
	ev, _ = next(t, coord)
	got = append(got, ev.Type)
	if want := "AgentActivated/telemetry ModelResult/telemetry ToolCalled/telemetry TaskCompleted"; strings.Join(got, " ") != want {
		t.Fatalf("got %s, want %s", strings.Join(got, " "), want)
	}
}
