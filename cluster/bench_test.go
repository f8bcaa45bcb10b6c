package cluster_test

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
	"github.com/axocoatl/axocoatl-go/secret"
)

// BenchmarkRoundTrip compares, one after the other in one process, on one
// local nats-server over TCP loopback (bench/run.sh repeats it so that the
// three see the same load; see bench/README.md):
//   - inproc: Engine.Execute of an echo agent on an Engine with the
//     in-memory lattice (no NATS at all), for reference;
//   - local: Engine.Execute of the echo agent on the daemon that hosts it
//     (its events go out on the NATS lattice, as in a cluster);
//   - nats: one NATS request/reply between two connections (a responder
//     that answers at once), the floor of any remote call;
//   - remote: Engine.Execute of the same agent from another daemon.
//
// The goal of issue 14: remote < 2 × local + nats.
func BenchmarkRoundTrip(b *testing.B) {
	url, a, c := twoNodes(b)
	ctx := context.Background()

	b.Run("inproc", func(b *testing.B) {
		e := axocoatl.New(axocoatl.Options{}) // the in-memory lattice
		defer e.Close(ctx)
		if err := e.AddAgent(agent.Spec{ID: "echo"}, provider.EchoModel{}); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := e.Execute(ctx, "echo", "ping"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("local", func(b *testing.B) {
		for b.Loop() {
			if _, err := a.e.Execute(ctx, "echo", "ping"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("nats", func(b *testing.B) {
		cli := natsEcho(b, url)
		payload := []byte(`{"task_id":"01a22d2d-240e-7000-8ee1-f0dc4363b0bb","agent_id":"echo","input":"ping","source":"library","from":"node-b"}`)
		for b.Loop() {
			if _, err := cli.Request("bench.rr", payload, 5*time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remote", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.e.Execute(ctx, "echo", "ping"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRoundTripPaired measures the same three calls as
// BenchmarkRoundTrip (local, nats, remote) in one loop, one of each per
// iteration in rotating order, so that all three see the same moment of a
// noisy machine; it reports each one's median and the goal's ratio
// remote / (2 × local + nats), which must stay under 1, of the medians and
// of the means. The caller's ctx is Background, as a library's often is.
func BenchmarkRoundTripPaired(b *testing.B) { pairedRoundTrip(b, context.Background()) }

// BenchmarkRoundTripPairedDoor is BenchmarkRoundTripPaired with a caller's
// ctx that can end, as the doors' (HTTP, A2A, MCP) are.
func BenchmarkRoundTripPairedDoor(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pairedRoundTrip(b, ctx)
}

func pairedRoundTrip(b *testing.B, callerCtx context.Context) {
	url, a, c := twoNodes(b)
	ctx := context.Background()
	cli := natsEcho(b, url)
	payload := []byte("ping")

	calls := []func(){
		func() {
			if _, err := a.e.Execute(ctx, "echo", "ping"); err != nil {
				b.Fatal(err)
			}
		},
		func() {
			if _, err := cli.Request("bench.rr", payload, 5*time.Second); err != nil {
				b.Fatal(err)
			}
		},
		func() {
			if res, err := c.e.Execute(callerCtx, "echo", "ping"); err != nil || res.Output != "ping" {
				b.Fatal(res, err)
			}
		},
	}
	took := make([][]time.Duration, len(calls))
	n := 0
	for b.Loop() {
		for k := range calls {
			i := (k + n) % len(calls)
			start := time.Now()
			calls[i]()
			took[i] = append(took[i], time.Since(start))
		}
		n++
	}
	local, nats, remote := testutil.Median(took[0]), testutil.Median(took[1]), testutil.Median(took[2])
	b.ReportMetric(float64(local.Nanoseconds()), "local-ns")
	b.ReportMetric(float64(nats.Nanoseconds()), "nats-ns")
	b.ReportMetric(float64(remote.Nanoseconds()), "remote-ns")
	b.ReportMetric(float64(remote)/float64(2*local+nats), "remote/bound")
	meanLocal, meanNATS, meanRemote := mean(took[0]), mean(took[1]), mean(took[2])
	b.ReportMetric(float64(meanRemote)/float64(2*meanLocal+meanNATS), "mean-remote/bound")
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// twoNodes starts a nats-server and two daemons on it: node-a hosts the
// echo agent, node-b lists it. The tests' own subscriptions (what each node
// ran) are closed: they are not part of what is measured.
func twoNodes(b *testing.B) (url string, a, c *node) {
	ns := startNATS(b, -1)
	url = ns.ClientURL()
	a = newNode(b, url, "node-a", fast, map[string]agent.Model{"echo": provider.EchoModel{}})
	c = newNode(b, url, "node-b", fast, nil)
	_ = a.local.Close()
	_ = c.local.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if info, err := c.e.Agent("echo"); err == nil && info.Node == "node-a" {
			return url, a, c
		}
		if time.Now().After(deadline) {
			b.Fatal("node-b does not list node-a's echo")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// natsEcho is a connection whose requests on bench.rr another connection
// answers at once with their data: one plain NATS request/reply.
func natsEcho(b *testing.B, url string) *natsgo.Conn {
	srv, err := natsgo.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	cli, err := natsgo.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cli.Close)
	if _, err := srv.Subscribe("bench.rr", func(m *natsgo.Msg) { _ = m.Respond(m.Data) }); err != nil {
		b.Fatal(err)
	}
	if err := srv.Flush(); err != nil {
		b.Fatal(err)
	}
	return cli
}

// BenchmarkRoundTripSigned measures what cluster.key costs (issue 30's
// goal: at most 5%): the cross-daemon Engine.Execute of the echo agent on
// two daemons without a key and on two daemons with one (every task and
// answer sealed and opened, the run's end signed, its start and model
// call unsigned as the daemon's ObserveOnly has it), one of each per iteration in
// alternating order, on one nats-server, so that both see the same moment
// of a noisy machine. It reports each one's median, and signed/plain of
// the medians and of the means.
func BenchmarkRoundTripSigned(b *testing.B) {
	ns := startNATS(b, -1)
	url := ns.ClientURL()
	pair := func(prefix string, key secret.Secret) *node {
		// As package config builds a daemon's bus: the run's telemetry
		// unsigned (no effect without a key).
		opts := latticenats.Options{Prefix: prefix, Key: key, ObserveOnly: axocoatl.ObserveOnlyEvents()}
		opts.Node = prefix + "-a"
		newNodeWith(b, url, opts, fast, map[string]agent.Model{"echo": provider.EchoModel{}}).local.Close()
		opts.Node = prefix + "-b"
		c := newNodeWith(b, url, opts, fast, nil)
		_ = c.local.Close()
		deadline := time.Now().Add(5 * time.Second)
		for {
			if info, err := c.e.Agent("echo"); err == nil && info.Node == prefix+"-a" {
				return c
			}
			if time.Now().After(deadline) {
				b.Fatal("the caller does not list echo")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	plain := pair("plain", "")
	signed := pair("signed", "bench-cluster-key-0123456789abcdef")
	if plain.m.Signed() || !signed.m.Signed() {
		b.Fatal("keys not as meant")
	}
	ctx := context.Background()
	calls := []*node{plain, signed}
	took := make([][]time.Duration, len(calls))
	n := 0
	for b.Loop() {
		for k := range calls {
			i := (k + n) % len(calls)
			start := time.Now()
			if res, err := calls[i].e.Execute(ctx, "echo", "ping"); err != nil || res.Output != "ping" {
				b.Fatal(res, err)
			}
			took[i] = append(took[i], time.Since(start))
		}
		n++
	}
	p, s := testutil.Median(took[0]), testutil.Median(took[1])
	b.ReportMetric(float64(p.Nanoseconds()), "plain-ns")
	b.ReportMetric(float64(s.Nanoseconds()), "signed-ns")
	b.ReportMetric(float64(s)/float64(p), "signed/plain")
	b.ReportMetric(float64(mean(took[1]))/float64(mean(took[0])), "mean-signed/plain")
}
