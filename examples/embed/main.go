// Command embed mounts axocoatl into an existing net/http service: the host
// keeps its own mux and routes, and adds two agents, reachable from its own
// route, over MCP and over A2A, all under the prefix /ai/.
//
//	go run ./examples/embed
//	curl -s localhost:8081/ask -d 'what is MCP?'
//	curl -s localhost:8081/ai/.well-known/agent-card.json   # A2A card; clients take http://localhost:8081/ai as base URL
//	# MCP clients connect to http://localhost:8081/ai/mcp (tools agent_helper, agent_shouter)
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "address to listen on")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *addr, log); err != nil {
		log.Error("embed", "error", err)
		os.Exit(1)
	}
}

// shout is a host's own model: it answers in capitals. Any agent.Model works
// (openai.New(provider.Config{...}) of package agent/provider/openai for a
// real one).
type shout struct{}

func (shout) Generate(_ context.Context, req *agent.Request) (*agent.Response, error) {
	if len(req.Messages) == 0 {
		return &agent.Response{}, nil
	}
	return &agent.Response{Content: strings.ToUpper(req.Messages[len(req.Messages)-1].Content)}, nil
}

// run listens on addr and serves until ctx ends.
func run(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return serve(ctx, ln, log)
}

// serve serves on ln until ctx ends, then lets in-flight requests and runs
// finish. It closes ln.
func serve(ctx context.Context, ln net.Listener, log *slog.Logger) error {
	// The Engine and its agents; the modules are started by Use and
	// stopped by engine.Close.
	engine := axocoatl.New(axocoatl.Options{Logger: log})
	mcpSrv, err := mcpserver.New(mcpserver.Config{})
	if err != nil {
		ln.Close()
		return err
	}
	a2aDoor, err := a2a.New(a2a.Config{Name: "embed-example"})
	if err == nil {
		err = errors.Join(
			engine.AddAgent(agent.Spec{ID: "helper", Description: "Repeats the question."}, provider.EchoModel{}),
			engine.AddAgent(agent.Spec{ID: "shouter", Description: "Answers in capitals."}, shout{}),
			engine.Use(ctx, mcpSrv),
			engine.Use(ctx, a2aDoor),
		)
	}
	if err != nil {
		ln.Close()
		return errors.Join(err, engine.Close(context.Background()))
	}

	// React to what agents do: every finished task is on the lattice.
	sub, err := engine.Bus().Subscribe(lattice.Filter{Types: []string{axocoatl.EventTaskCompleted, axocoatl.EventAgentFailed}}, 0)
	if err != nil {
		ln.Close()
		return errors.Join(err, engine.Close(context.Background()))
	}
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		for ev := range sub.Events() { // ends when the Engine closes its bus
			log.Info("lattice", "type", ev.Type, "payload", string(ev.Payload))
		}
	}()

	// The agents' doors, relative to /ai: MCP at /mcp, A2A at its paths.
	ai := http.NewServeMux()
	ai.Handle("/mcp", mcpSrv)
	for _, p := range a2a.Paths() {
		ai.Handle(p, a2aDoor)
	}

	// The host's own mux: its routes, and the agents under /ai/.
	mux := http.NewServeMux()
	mux.Handle("/ai/", http.StripPrefix("/ai", ai))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the host's own page\n") })
	mux.HandleFunc("POST /ask", func(w http.ResponseWriter, r *http.Request) {
		question, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		res, err := engine.ExecuteRequest(r.Context(), axocoatl.Request{AgentID: "helper", Input: string(question), Source: axocoatl.SourceAPI})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		io.WriteString(w, res.Output+"\n")
	})

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	engine.ConfigureServer(srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String())

	var serveErr error
	select {
	case serveErr = <-served: // the listener failed
	case <-ctx.Done():
	}
	// Shutdown waits for in-flight requests, but an MCP client's GET
	// stream lasts as long as its session, which engine.Close ends: run
	// both at once. engine.Close lets in-flight runs finish first.
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- engine.Close(shutdown) }()
	err = errors.Join(srv.Shutdown(shutdown), <-closed)
	if serveErr == nil {
		serveErr = <-served // http.ErrServerClosed
	}
	<-logged
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return errors.Join(serveErr, err)
}
