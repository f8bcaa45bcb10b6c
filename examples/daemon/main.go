// Command axocoatl is the turnkey daemon: it serves the built-in default
// config (one echo agent on 127.0.0.1:8080). The daemon issue grows it into
// the full CLI.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "axocoatl:", err)
		os.Exit(1)
	}
}

func run() error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	eng := axocoatl.New(axocoatl.Options{Logger: log})
	if err := eng.AddAgent(agent.Spec{ID: "assistant", Name: "Assistant", Provider: provider.Echo}, provider.EchoModel{}); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, `{"status":"ok"}`) })
	mux.HandleFunc("POST /api/agents/{id}/execute", func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Input string }
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res, err := eng.ExecuteRequest(r.Context(), axocoatl.Request{AgentID: r.PathValue("id"), Input: in.Input, Source: axocoatl.SourceAPI})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"task_id": res.TaskID, "agent_id": res.AgentID, "status": "completed", "output": res.Output})
	})
	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); srv.Shutdown(context.Background()) }()
	log.Info("serving", "addr", srv.Addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return eng.Close(context.Background())
}
