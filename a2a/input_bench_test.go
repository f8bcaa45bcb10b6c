package a2a_test

import (
	"context"
	"testing"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// BenchmarkInputRequiredRoundTrip is #27's A2A figure: an a2a-go/v2
// client over loopback JSON-RPC answers allow to an input-required task,
// and the time from the answer leaving the client to the gated tool
// starting is measured (median reported as answer-to-tool-ms; the bound
// is 5 ms). Each iteration sends a fresh task and waits for it to ask
// first, off the clock of the metric.
//
//	go test -run '^$' -bench InputRequiredRoundTrip -benchtime 200x ./a2a/
func BenchmarkInputRequiredRoundTrip(b *testing.B) {
	f := newInputFixture(b)
	c := f.v1(b, "alice-token-0123456789", a2a1.TransportProtocolJSONRPC)
	ctx := context.Background()
	allow := a2a1.NewDataPart(map[string]any{"approval": "allow"})
	waits := make([]time.Duration, 0, b.N)
	for b.Loop() {
		task := v1Send(b, c, v1Message(`{"path":"a.txt"}`, map[string]any{"receiver_id": "gated"}))
		if task.Status.State != a2a1.TaskStateInputRequired {
			b.Fatalf("task %s", task.Status.State)
		}
		sent := time.Now()
		res, err := c.SendMessage(ctx, v1Answer(task, allow))
		if err != nil {
			b.Fatal(err)
		}
		started := <-f.started
		waits = append(waits, started.Sub(sent))
		if done, ok := res.(*a2a1.Task); !ok || done.Status.State != a2a1.TaskStateCompleted {
			b.Fatalf("after allow: %#v", res)
		}
		<-f.told
	}
	b.ReportMetric(float64(testutil.Median(waits).Microseconds())/1000, "answer-to-tool-ms")
}
