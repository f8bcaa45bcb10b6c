package axocoatl_test

import (
	"context"
	"errors"
	"testing"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// The seam between a tool source and the module that reaches a human:
// nobody set is ErrNoQuestioner; a remove func removes only its own
// questioner.
func TestQuestionerSeam(t *testing.T) {
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	if _, err := e.AskQuestion(context.Background(), axocoatl.Question{Server: "s"}); !errors.Is(err, axocoatl.ErrNoQuestioner) {
		t.Fatalf("no questioner: %v, want ErrNoQuestioner", err)
	}
	answer := func(by string) axocoatl.Questioner {
		return questionerFunc(func(_ context.Context, q axocoatl.Question) (axocoatl.UserAnswer, error) {
			return axocoatl.UserAnswer{Accepted: true, By: by + ":" + q.Server}, nil
		})
	}
	removeA := e.SetQuestioner(answer("a"))
	removeB := e.SetQuestioner(answer("b"))
	removeA() // no longer the one set: b stays
	if ans, err := e.AskQuestion(context.Background(), axocoatl.Question{Server: "s"}); err != nil || ans.By != "b:s" {
		t.Fatalf("answer %+v, %v; want b's", ans, err)
	}
	removeB()
	if _, err := e.AskQuestion(context.Background(), axocoatl.Question{}); !errors.Is(err, axocoatl.ErrNoQuestioner) {
		t.Fatalf("after remove: %v, want ErrNoQuestioner", err)
	}
}

type questionerFunc func(context.Context, axocoatl.Question) (axocoatl.UserAnswer, error)

func (f questionerFunc) AskQuestion(ctx context.Context, q axocoatl.Question) (axocoatl.UserAnswer, error) {
	return f(ctx, q)
}
