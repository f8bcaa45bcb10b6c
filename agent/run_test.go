package agent

import (
	"context"
	"strings"
	"testing"
)

type nilModel struct{}

func (nilModel) Generate(context.Context, *Request) (*Response, error) { return nil, nil }

// A broken model is a failed run, not a panic.
func TestRunNilResponse(t *testing.T) {
	_, err := Run(context.Background(), Spec{ID: "a"}, nilModel{}, nil, "hi")
	if err == nil || !strings.Contains(err.Error(), "neither a response nor an error") {
		t.Fatalf("err = %v", err)
	}
}
