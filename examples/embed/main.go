// Command embed mounts axocoatl into an existing net/http service: the host
// keeps its own mux and routes, and adds one that runs an agent.
//
//	go run ./examples/embed
//	curl -s localhost:8081/ask -d 'what is MCP?'
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
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/lattice"
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

// run serves until ctx ends, then lets in-flight requests and runs finish.
func run(ctx context.Context, addr string, log *slog.Logger) error {
	// The Engine: one agent on the offline echo model. Swap in
	// openai.New(provider.Config{}) (package agent/provider/openai; its key
	// from OPENAI_API_KEY) for a real model.
	engine := axocoatl.New(axocoatl.Options{Logger: log})
	if err := engine.AddAgent(agent.Spec{ID: "helper", Description: "Answers questions."}, provider.EchoModel{}); err != nil {
		return err
	}

	// React to what agents do: every finished task is on the lattice.
	sub, err := engine.Bus().Subscribe(lattice.Filter{Types: []string{lattice.TaskCompleted, lattice.AgentFailed}}, 0)
	if err != nil {
		return err
	}
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		for ev := range sub.Events() { // ends when the Engine closes its bus
			log.Info("lattice", "type", ev.Type, "payload", string(ev.Payload))
		}
	}()

	// The host's own mux, with the agent behind one of its routes.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the host's own page\n") })
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

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String())

	select {
	case err := <-served: // the listener failed
		engine.Close(context.Background())
		<-logged
		return err
	case <-ctx.Done():
	}
	// Serve returns as soon as Shutdown begins: wait for Shutdown itself,
	// then for the Engine, so in-flight requests and runs finish.
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = errors.Join(srv.Shutdown(shutdown), engine.Close(shutdown))
	<-served // http.ErrServerClosed
	<-logged
	return err
}
