package a2a_test

import (
	"context"
	"testing"
	"time"

	v1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/axocoatl/axocoatl-go/a2a"
)

// ListTasks' status timestamp filter works with the a2a-go/v2 client on
// both bindings: over HTTP+JSON it sends the filter as lastUpdatedAfter
// (a2a.proto names it statusTimestampAfter; both are read).
func TestV1ListTasksTimestampFilter(t *testing.T) {
	for _, binding := range []v1.TransportProtocol{v1.TransportProtocolJSONRPC, v1.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			f := newFixture(t, a2a.Config{})
			c, _, _ := f.v1Client(t, f.srv.URL, binding)
			v1Send(t, c, v1Message("one", nil))
			ctx := context.Background()
			all, err := c.ListTasks(ctx, &v1.ListTasksRequest{})
			must(t, err)
			if len(all.Tasks) != 1 {
				t.Fatalf("ListTasks without a filter: %d tasks, want 1", len(all.Tasks))
			}
			future := time.Now().Add(time.Hour)
			none, err := c.ListTasks(ctx, &v1.ListTasksRequest{StatusTimestampAfter: &future})
			must(t, err)
			if len(none.Tasks) != 0 {
				t.Fatalf("ListTasks updated after %s: %d tasks, want none", future, len(none.Tasks))
			}
		})
	}
}
