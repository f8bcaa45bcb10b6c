// Command embed mounts axocoatl into an existing net/http service: the host
// keeps its own mux and routes, and adds one that runs an agent.
//
//	go run ./examples/embed
//	curl -s localhost:8081/ask -d 'what is MCP?'
package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
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
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	// The Engine: one agent on the offline echo model. Swap in
	// provider.New("openai", provider.Config{...}) for a real model.
	engine := axocoatl.New(axocoatl.Options{Logger: log})
	if err := engine.AddAgent(agent.Spec{ID: "helper", Description: "Answers questions."}, provider.EchoModel{}); err != nil {
		log.Error("add agent", "error", err)
		os.Exit(1)
	}

	// React to what agents do: every finished task is on the lattice.
	sub, err := engine.Bus().Subscribe(lattice.Filter{Types: []string{lattice.TaskCompleted, lattice.AgentFailed}}, 0)
	if err != nil {
		log.Error("subscribe", "error", err)
		os.Exit(1)
	}
	go func() {
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

	srv := &http.Server{Addr: "127.0.0.1:8081", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
		engine.Close(shutdown) // in-flight runs finish, then modules and the bus stop
	}()
	log.Info("listening", "addr", srv.Addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", "error", err)
		os.Exit(1)
	}
}
