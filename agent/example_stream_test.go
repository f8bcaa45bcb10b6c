package agent_test

import (
	"context"
	"fmt"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
)

// A door that shows an answer as it is written asks for it with
// GenerateStream, which serves a model that streams (here the offline
// echo, word by word) and one that does not alike.
func ExampleGenerateStream() {
	req := &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "written word by word"}}}
	res, err := agent.GenerateStream(context.Background(), provider.EchoModel{}, req, func(d agent.Delta) {
		if d.Kind == agent.DeltaText {
			fmt.Printf("%q\n", d.Text)
		}
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s (%d words in, %d out)\n", res.Content, res.Usage.InputTokens, res.Usage.OutputTokens)
	// Output:
	// "written "
	// "word "
	// "by "
	// "word"
	// written word by word (4 words in, 4 out)
}
