// Package retry holds the pacing that modules reconnecting to a peer share:
// a jittered exponential backoff and a sleep that ends with its context.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is base doubled per consecutive failure (failures counts from 1),
// capped at top, with ±20% jitter so that peers failing together (a
// network outage) are not retried in lockstep.
func Backoff(base, top time.Duration, failures int) time.Duration {
	d := base
	for i := 1; i < failures && d < top; i++ {
		d *= 2
	}
	d = min(d, top)
	return d - d/5 + rand.N(2*d/5+1)
}

// Sleep waits d, or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
