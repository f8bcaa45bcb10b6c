package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/axocoatl/axocoatl-go/mcpclient"
)

// runMCPLogin is `axocoatl mcp login [--config PATH] [--url URL] <server>`:
// ask the running daemon to start the OAuth login of one mcp_servers
// entry, print the URL to open, and wait until the authorization server
// has sent the browser back to the daemon's /oauth/callback and the code
// is exchanged ([mcpclient.LoginVia]).
func runMCPLogin(ctx context.Context, c *cli, args []string) int {
	var cf configFlags
	fs := newFlags(c, "mcp login", "mcp login [--config PATH] [--url DAEMON_URL] <server>", &cf, false)
	daemonURL := fs.String("url", "", "the running daemon's base URL (default: server.public_url, else http://server.addr)")
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") { // the name, then the flags
		name, args = args[0], args[1:]
	} else if n := len(args); n > 0 && !strings.HasPrefix(args[n-1], "-") && (n < 2 || !strings.HasPrefix(args[n-2], "-") || strings.Contains(args[n-2], "=")) {
		name, args = args[n-1], args[:n-1] // the flags, then the name
	}
	if name == "" {
		fs.Usage()
		return exitUsage
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, ok := c.load(ctx, cf)
	if !ok {
		return exitFail
	}
	base := *daemonURL
	if base == "" {
		base = cfg.Server.PublicURL
	}
	if base == "" {
		base = "http://" + cfg.Server.Addr
	}
	err := mcpclient.LoginVia(ctx, base, cfg.Server.APIToken.Reveal(), name, func(u string) {
		fmt.Fprintf(c.stdout, "Open this URL in a browser to log in to %s:\n\n  %s\n\nWaiting for the authorization server to send you back to the daemon ...\n", name, u)
	})
	if err != nil {
		printErrors(c.stderr, fmt.Errorf("mcp login: %w", err))
		return exitFail
	}
	fmt.Fprintf(c.stdout, "Logged in: %s connects now.\n", name)
	return exitOK
}
