package main

import (
	"context"
	"fmt"
)

// Wiring of the mcpserver module. OWNER: the mcpserver engineer replaces
// this file (see /work/notes/COORD.md, "daemon wiring pattern"): routes for
// /mcp, and runMCP for `axocoatl mcp serve`.

// MCPServerSection is the mcpserver part of Config (inline).
type MCPServerSection struct{}

func mcpServerModule() module { return module{name: "mcpserver"} }

// runMCP is `axocoatl mcp …`.
func runMCP(_ context.Context, c *cli, args []string) int {
	fmt.Fprintln(c.stderr, "axocoatl mcp serve: not built yet")
	return exitUsage
}
