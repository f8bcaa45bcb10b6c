// Command openai is the smallest host of one provider: it asks an
// OpenAI-compatible server (OPENAI_API_KEY; the base URL in OPENAI_HOST_URL
// for this example) one question. bench/README.md measures what building it
// costs; agent/provider's structure test checks it builds no other provider.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
)

func main() {
	m, err := openai.New(provider.Config{BaseURL: os.Getenv("OPENAI_HOST_URL")})
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
