// Command anthropic is the smallest host of one provider: it asks Claude
// (ANTHROPIC_API_KEY) one question. bench/README.md measures what building
// it costs; agent/provider's structure test checks it builds no other
// provider.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/anthropic"
)

func main() {
	m, err := anthropic.New(provider.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	resp, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: os.Args[len(os.Args)-1]}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(resp.Content)
}
