package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/axocoatl/axocoatl-go/mcpclient"
)

// MCPClientSection is the mcpclient part of Config (inline): the
// `mcp_servers:` list, decoded straight into the module's ServerConfig.
type MCPClientSection struct {
	MCPServers mcpServerList `yaml:"mcp_servers"`
}

// mcpServerList validates what the entries cannot see alone: unique names.
// (Each entry's own Validate is called by the config loader.)
type mcpServerList []mcpclient.ServerConfig

func (l mcpServerList) Validate() error { return mcpclient.ValidateNames(l) }

func mcpClientModule() module {
	return module{name: "mcpclient", start: startMCPClient, doctor: doctorMCPClient}
}

// startMCPClient attaches the module. It returns at once: servers connect in
// the background, and their tools appear on the Engine as they do.
func startMCPClient(ctx context.Context, d *daemon) error {
	if len(d.cfg.MCPServers) == 0 {
		return nil
	}
	// A stdio server inheriting the environment can read the daemon's own
	// credentials: whatever a server says is scrubbed of them all.
	m, err := mcpclient.New(mcpclient.Config{Servers: d.cfg.MCPServers, Scrub: d.cfg.secrets()})
	if err != nil {
		return err
	}
	return d.engine.Use(ctx, m)
}

// doctorMCPClient connects to every server at once, lists its tools and
// records the hosts of the HTTP servers as egress.
func doctorMCPClient(ctx context.Context, cfg *Config, r *doctorReport) {
	scrub := cfg.secrets()
	var wg sync.WaitGroup
	for _, sc := range cfg.MCPServers {
		check := "mcp server " + sc.Name
		if sc.URL != "" {
			if u, err := url.Parse(sc.URL); err == nil {
				r.addEgress(u.Host, check)
			}
		}
		wg.Go(func() {
			tools, err := mcpclient.Check(ctx, sc, scrub, nil)
			if err != nil {
				r.fail(check, strings.TrimPrefix(err.Error(), check+": "))
				return
			}
			r.ok(check, fmt.Sprintf("%s, %d tools: %s", describeTransport(sc), len(tools), strings.Join(tools, ", ")))
		})
	}
	wg.Wait()
}

// describeTransport names the transport and target, never env or header
// values (nor a URL's userinfo, query or key-like path segments).
func describeTransport(sc mcpclient.ServerConfig) string {
	return sc.Transport() + " " + sc.Target()
}
