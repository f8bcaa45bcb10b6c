package a2aremote

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

func BenchmarkTmpParse(b *testing.B) {
	args := json.RawMessage(`{"input":"hi"}`)
	for b.Loop() {
		_, _ = parseInput(args)
	}
}

func BenchmarkTmpCtx(b *testing.B) {
	life, c := context.WithCancel(context.Background())
	defer c()
	ctx := context.Background()
	for b.Loop() {
		cctx, cancel := context.WithCancelCause(ctx)
		timer := time.AfterFunc(time.Minute, func() { cancel(errDeadline) })
		stop := context.AfterFunc(life, func() { cancel(errStopping) })
		_ = cctx
		stop()
		timer.Stop()
		cancel(nil)
	}
}

func BenchmarkTmpNewMessage(b *testing.B) {
	for b.Loop() {
		_ = a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
	}
}

func BenchmarkTmpNewContextID(b *testing.B) {
	for b.Loop() {
		_ = a2a.NewContextID()
	}
}

func BenchmarkTmpPost(b *testing.B) {
	r := &remote{}
	task := &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted},
		Artifacts: []*a2a.Artifact{{ID: "a1", Parts: a2a.ContentParts{a2a.NewTextPart("remote answer to: hi")}}}}
	for b.Loop() {
		var t taskState
		t.limit = 1 << 20
		t.apply(task)
		_, _ = r.result(t)
	}
}

func BenchmarkTmpCtxTimeoutCause(b *testing.B) {
	life, c := context.WithCancel(context.Background())
	defer c()
	ctx := context.Background()
	for b.Loop() {
		cctx, cancel := context.WithTimeoutCause(ctx, time.Minute, errDeadline)
		stop := context.AfterFunc(life, cancel)
		_ = cctx
		stop()
		cancel()
	}
}

func BenchmarkTmpCtxParts(b *testing.B) {
	life, c := context.WithCancel(context.Background())
	defer c()
	ctx := context.Background()
	b.Run("cancelcause", func(b *testing.B) {
		for b.Loop() {
			_, cancel := context.WithCancelCause(ctx)
			cancel(nil)
		}
	})
	b.Run("timer", func(b *testing.B) {
		for b.Loop() {
			t := time.AfterFunc(time.Minute, func() {})
			t.Stop()
		}
	})
	b.Run("afterfunc", func(b *testing.B) {
		for b.Loop() {
			stop := context.AfterFunc(life, func() {})
			stop()
		}
	})
	b.Run("cancelcause+afterfunc-onchild", func(b *testing.B) {
		for b.Loop() {
			cctx, cancel := context.WithCancelCause(ctx)
			stop := context.AfterFunc(cctx, func() {})
			stop()
			cancel(nil)
		}
	})
}

func BenchmarkTmpCtx2(b *testing.B) {
	ctx := context.Background()
	b.Run("timeoutcause", func(b *testing.B) {
		for b.Loop() {
			cctx, cancel := context.WithTimeoutCause(ctx, time.Minute, errDeadline)
			_ = cctx
			cancel()
		}
	})
	b.Run("timeoutcause-done", func(b *testing.B) {
		for b.Loop() {
			cctx, cancel := context.WithTimeoutCause(ctx, time.Minute, errDeadline)
			_ = cctx.Done()
			cancel()
		}
	})
	b.Run("cancelcause-done", func(b *testing.B) {
		for b.Loop() {
			cctx, cancel := context.WithCancelCause(ctx)
			_ = cctx.Done()
			cancel(nil)
		}
	})
}
