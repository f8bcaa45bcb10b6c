package a2aremote

import (
	"fmt"
	"testing"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
)

// A remote can send as many artifacts as fit in max_response_bytes (about
// 100,000 small ones in 8 MiB): taking each must cost the same whatever
// came before, not a walk over every artifact so far (which made a call
// spend minutes of CPU). Also checks the text kept stays within the limit.
func TestManyArtifactsLinear(t *testing.T) {
	const n = 100_000
	ts := taskState{limit: 1 << 10}
	start := time.Now()
	for i := range n {
		ts.apply(&a2a1.TaskArtifactUpdateEvent{TaskID: "t", Artifact: &a2a1.Artifact{
			ID: a2a1.ArtifactID(fmt.Sprint(i)), Parts: a2a1.ContentParts{a2a1.NewTextPart("xx")}}})
	}
	ts.apply(&a2a1.TaskStatusUpdateEvent{TaskID: "t", Status: a2a1.TaskStatus{State: a2a1.TaskStateCompleted}})
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("%d artifacts took %s", n, d)
	}
	out := ts.text()
	if len(out) > 1<<10+200 {
		t.Fatalf("text is %d bytes, over the limit", len(out))
	}
}
