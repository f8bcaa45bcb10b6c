package retry

import (
	"context"
	"testing"
	"time"
)

// The delay doubles per failure from base, stops at top, and stays within
// ±20% of that.
func TestBackoff(t *testing.T) {
	base, top := 100*time.Millisecond, time.Second
	for failures, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 50: time.Second} {
		for range 200 {
			d := Backoff(base, top, failures)
			if d < want-want/5 || d > want+want/5 {
				t.Fatalf("Backoff(failures %d) = %s, want %s ±20%%", failures, d, want)
			}
		}
	}
}

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep returned false with a live context")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Sleep(ctx, time.Hour) || time.Since(start) > time.Second {
		t.Fatal("Sleep did not end with its context")
	}
}
