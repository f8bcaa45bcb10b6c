package mcpclient

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
)

// toolsSeen is an agent.Model that records the tools of each request.
type toolsSeen struct {
	mu    sync.Mutex
	tools [][]string
}

func (m *toolsSeen) Generate(_ context.Context, req *agent.Request) (*agent.Response, error) {
	var names []string
	for _, d := range req.Tools {
		names = append(names, d.Name)
	}
	m.mu.Lock()
	m.tools = append(m.tools, names)
	m.mu.Unlock()
	return &agent.Response{Content: "ok"}, nil
}

// A run started right after Use, while a server that takes a second before
// it answers initialize is still on its first connect, is offered that
// server's tools: it waits for the connect instead of running without them.
// Before the fix the model was offered no tools.
func TestRunRightAfterStartGetsSlowServersTools(t *testing.T) {
	slow := helperServer("slow", "slow")
	slow.Timeout = time.Minute // a loaded machine starts the child slowly
	e, _ := startModule(t, Config{Servers: []ServerConfig{slow}}, nil)
	model := &toolsSeen{}
	if err := e.AddAgent(agent.Spec{ID: "a"}, model); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Execute(context.Background(), "a", "hi"); err != nil {
		t.Fatal(err)
	}
	model.mu.Lock()
	defer model.mu.Unlock()
	if len(model.tools) != 1 || !slices.Contains(model.tools[0], "mcp__slow__echo") {
		t.Fatalf("the model was offered %v, want the slow server's tools (mcp__slow__echo…)", model.tools)
	}
}

func TestToolPrefix(t *testing.T) {
	long := "a-server-name-that-goes-on-and-on-and-on-and-on-and-on-and-on"
	for _, c := range []struct{ server, tool string }{{"fs", "read"}, {"my.srv", "x"}, {long, "tool"}, {long, "t"}} {
		if q, p := QualifiedName(c.server, c.tool), toolPrefix(c.server); len(q) < len(p) || q[:len(p)] != p {
			t.Errorf("QualifiedName(%q, %q) = %q does not begin with toolPrefix %q", c.server, c.tool, q, p)
		}
	}
}
