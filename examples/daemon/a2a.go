package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/axocoatl/axocoatl-go/a2a"
)

// A2ASection is the a2a part of Config (inline): the optional `a2a:`
// section tunes the task store and limits, e.g.
//
//	a2a:
//	  max_tasks: 1000   # finished tasks kept for tasks/get
//	  task_ttl: 1h
type A2ASection struct {
	A2A A2AConfig `yaml:"a2a"`
}

// A2AConfig is a2a.Config as the daemon takes it: the public URL and the
// token come from the server section, so the section may not set them.
type A2AConfig a2a.Config

// Validate checks the section.
func (c A2AConfig) Validate() error {
	if c.PublicURL != "" {
		return errors.New("public_url: set server.public_url instead")
	}
	if !c.APIToken.IsZero() {
		return errors.New("api_token: set server.api_token instead")
	}
	if len(c.AllowedOrigins) > 0 {
		return errors.New("allowed_origins: set server.allowed_origins instead")
	}
	if err := a2a.Config(c).Validate(); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "a2a: "))
	}
	return nil
}

// a2aModule serves the A2A doors: the cards are public, task intake and
// JSON-RPC need the token when one is set. The handler is built with the
// routes (serve only) and joins the Engine as a Module, so Engine.Close
// cancels the runs it started.
func a2aModule() module {
	return module{
		name: "a2a",
		routes: func(d *daemon, m *mux) error {
			cfg := a2a.Config(d.cfg.A2A)
			cfg.PublicURL = d.cfg.Server.PublicURL
			if u, err := url.Parse(cfg.PublicURL); err == nil && u.Port() == "0" {
				// Defaulted from a listen address on port 0: the real port
				// is known only per request, from its Host.
				cfg.PublicURL = ""
			}
			// The mux checks the token; the handler only advertises it.
			cfg.APIToken = d.cfg.Server.APIToken
			cfg.Logger = d.log
			if cfg.BodyTimeout == 0 {
				// The mux does not read these bodies: bound them as it would.
				cfg.BodyTimeout = d.cfg.Server.BodyTimeout
			}
			h, err := a2a.New(d.engine, cfg)
			if err != nil {
				return err
			}
			if err := d.engine.Use(context.Background(), h); err != nil {
				return err
			}
			agentID := func(r *http.Request) string { return httprouter.ParamsFromContext(r.Context()).ByName("id") }
			// JSON-RPC must answer every request with HTTP 200, an oversized
			// body included, so those routes skip the mux's early 413: the
			// handler bounds bodies to the same 1 MiB itself.
			rpc := func(path string, serve http.HandlerFunc) error {
				return m.mount(route{http.MethodPost, path, false}, m.auth.require(serve))
			}
			return errors.Join(
				m.public(http.MethodGet, a2a.PathAxocoatlCard, http.HandlerFunc(h.ServeAxocoatlCard)),
				m.private(http.MethodPost, a2a.PathTasks, http.HandlerFunc(h.ServeTasks)),
				m.public(http.MethodGet, a2a.PathAgentCard, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					h.ServeAgentCard(w, r, "")
				})),
				m.public(http.MethodGet, a2a.PathAgentPrefix+":id"+a2a.PathAgentCard, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					h.ServeAgentCard(w, r, agentID(r))
				})),
				rpc(a2a.PathJSONRPC, func(w http.ResponseWriter, r *http.Request) { h.ServeJSONRPC(w, r, "") }),
				rpc(a2a.PathAgentPrefix+":id", func(w http.ResponseWriter, r *http.Request) { h.ServeJSONRPC(w, r, agentID(r)) }),
			)
		},
	}
}
