package cluster_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/cluster"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// Two Engines on one NATS server: B runs the agent A hosts. (A daemon gets
// all of this from config.Build with lattice.backend nats.)
func Example() {
	ns, _ := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	go ns.Start()
	ns.ReadyForConnections(5 * time.Second)
	defer ns.Shutdown()
	ctx := context.Background()

	engine := func(node string) (*axocoatl.Engine, func()) {
		bus, _ := latticenats.Connect(ns.ClientURL(), latticenats.Options{Node: node})
		e := axocoatl.New(axocoatl.Options{Bus: bus})
		if node == "a" {
			_ = e.AddAgent(agent.Spec{ID: "echo"}, provider.EchoModel{})
		}
		m, _ := cluster.New(cluster.Config{}) // the NATS connection, node and prefix come from the bus
		_ = e.Use(ctx, m)
		return e, func() { _ = e.Close(ctx); _ = bus.Close() } // the Engine first: the others hear it leave
	}
	_, closeA := engine("a")
	defer closeA()
	b, closeB := engine("b")
	defer closeB()

	for { // B hears A's announcement within a round trip
		if _, err := b.Agent("echo"); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	info, _ := b.Agent("echo")
	res, err := b.Execute(ctx, "echo", "hello from b")
	fmt.Println(info.Node, res.Output, err)
	// Output: a hello from b <nil>
}
