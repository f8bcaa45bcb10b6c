package lattice

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Guards: bound "history in the ready frame" (event stream) (docs/bounds.md).
func TestHistoryKeepsTheLatestInOrder(t *testing.T) {
	bus := NewMemory()
	defer bus.Close()
	h, err := NewHistory(bus, 3, 32)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for i := range 5 {
		ev, _ := New(fmt.Sprintf("E%d", i), "t", map[string]int{"i": i})
		bus.Publish(context.Background(), ev)
	}
	big, _ := New("Big", "t", map[string]string{"x": strings.Repeat("x", 300), "task_id": "t1"})
	bus.Publish(context.Background(), big)
	var got []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got = got[:0]
		for _, ev := range h.Snapshot() {
			got = append(got, ev.Type+string(ev.Payload))
		}
		if len(got) == 3 && strings.HasPrefix(got[2], "Big") {
			break
		}
	}
	want := []string{`E3{"i":3}`, `E4{"i":4}`, `Big{"bytes":323,"task_id":"t1","truncated":true}`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("snapshot %v, want %v", got, want)
	}
}
