package provider_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
)

// Echo streams word by word (each word with the spaces after it), the
// deltas make the answer exactly, and its usage counts words.
func TestEchoStreamsWords(t *testing.T) {
	req := &agent.Request{System: "Be brief.", Messages: []agent.Message{
		{Role: agent.RoleUser, Content: "first question"},
		{Role: agent.RoleAssistant, Content: "an answer"},
		{Role: agent.RoleUser, Content: "  hello   big\tworld\n"},
	}}
	var words []string
	res, err := provider.EchoModel{}.GenerateStream(context.Background(), req, func(d agent.Delta) {
		if d.Kind != agent.DeltaText {
			t.Errorf("delta of kind %d", d.Kind)
		}
		words = append(words, d.Text)
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"  hello   ", "big\t", "world\n"}; !reflect.DeepEqual(words, want) {
		t.Fatalf("deltas %q, want %q", words, want)
	}
	want := &agent.Response{Content: "  hello   big\tworld\n", Usage: agent.Usage{InputTokens: 2 + 2 + 2 + 3, OutputTokens: 3}}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("response %+v, want %+v", res, want)
	}
	gen, err := provider.EchoModel{}.Generate(context.Background(), req)
	if err != nil || !reflect.DeepEqual(gen, res) {
		t.Fatalf("Generate %+v, %v; GenerateStream %+v", gen, err, res)
	}

	// No user message: an empty answer, no delta.
	res, err = provider.EchoModel{}.GenerateStream(context.Background(), &agent.Request{}, func(agent.Delta) { t.Error("a delta for an empty answer") })
	if err != nil || res.Content != "" || res.Usage != (agent.Usage{}) {
		t.Fatalf("%+v, %v", res, err)
	}
}

// A cancelled call stops between words.
func TestEchoStreamCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	req := &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "one two three four"}}}
	n := 0
	_, err := provider.EchoModel{}.GenerateStream(ctx, req, func(agent.Delta) {
		n++
		if n == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || n != 2 {
		t.Fatalf("error %v after %d deltas, want context.Canceled after 2", err, n)
	}
}
