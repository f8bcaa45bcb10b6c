package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/axocoatl/axocoatl-go/mcpclient"
)

// loginPoll is how often `mcp login` asks the daemon whether the user has
// come back from the authorization server.
const loginPoll = 500 * time.Millisecond

// runMCPLogin is `axocoatl mcp login [--config PATH] [--url URL] <server>`:
// ask the running daemon to start the OAuth login of one mcp_servers
// entry, print the URL to open, and wait until the authorization server
// has sent the browser back to the daemon's /oauth/callback and the code
// is exchanged (or the login fails, or DefaultLoginTimeout passes).
func runMCPLogin(ctx context.Context, c *cli, args []string) int {
	const synopsis = "mcp login [--config PATH] [--url DAEMON_URL] <server>"
	var cf configFlags
	fs := newFlags(c, "mcp login", synopsis, &cf, false)
	daemonURL := fs.String("url", "", "the running daemon's base URL (default: server.public_url, else http://server.addr)")
	// The server's name may come before the flags or after them.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 || name == "" {
		fs.Usage()
		return exitUsage
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
	base = strings.TrimRight(base, "/")
	api := base + "/api/mcp/servers/" + url.PathEscape(name) + "/login"
	call := func(method string) (int, map[string]any, error) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, method, api, nil)
		if err != nil {
			return 0, nil, err
		}
		if tok := cfg.Server.APIToken.Reveal(); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("%s %s: %d, not JSON", method, api, resp.StatusCode)
		}
		return resp.StatusCode, body, nil
	}
	code, body, err := call(http.MethodPost)
	if err != nil {
		fmt.Fprintf(c.stderr, "axocoatl mcp login: is the daemon running at %s? %v\n", base, err)
		return exitFail
	}
	if code != http.StatusOK {
		fmt.Fprintf(c.stderr, "axocoatl mcp login %s: %d %s\n", name, code, errorMessage(body))
		return exitFail
	}
	fmt.Fprintf(c.stdout, "Open this URL in a browser to log in to %s:\n\n  %v\n\nWaiting for the authorization server to send you back to %s%s ...\n", name, body["url"], base, mcpclient.CallbackPath)
	deadline := time.NewTimer(mcpclient.DefaultLoginTimeout + time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(loginPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return exitFail
		case <-deadline.C:
			fmt.Fprintf(c.stderr, "axocoatl mcp login %s: no answer within %s\n", name, mcpclient.DefaultLoginTimeout)
			return exitFail
		case <-tick.C:
		}
		code, body, err := call(http.MethodGet)
		if err != nil {
			fmt.Fprintf(c.stderr, "axocoatl mcp login %s: %v\n", name, err)
			return exitFail
		}
		switch state, _ := body["state"].(string); {
		case code != http.StatusOK:
			fmt.Fprintf(c.stderr, "axocoatl mcp login %s: %d %s\n", name, code, errorMessage(body))
			return exitFail
		case state == mcpclient.LoginDone:
			fmt.Fprintf(c.stdout, "Logged in: %s connects now.\n", name)
			return exitOK
		case state == mcpclient.LoginFailed:
			fmt.Fprintf(c.stderr, "axocoatl mcp login %s: %v\n", name, body["error"])
			return exitFail
		}
	}
}

// errorMessage is the message of the API's JSON error shape.
func errorMessage(body map[string]any) string {
	if e, ok := body["error"].(map[string]any); ok {
		return fmt.Sprint(e["message"])
	}
	return fmt.Sprint(body)
}
