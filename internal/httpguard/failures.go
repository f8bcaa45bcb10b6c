package httpguard

import (
	"log/slog"
	"sync"
	"time"
)

// FailureLimit bounds wrong API tokens per client: past Max failures
// within Window, the client's requests to token routes get 429 with
// Retry-After until the window ends, without the token being checked (so
// guessing gains nothing), and one log line with the count is written per
// window. Other clients are not affected.
type FailureLimit struct {
	Max    int           // zero: 10; negative: no limit
	Window time.Duration // zero: 10s
	// Clients bounds how many clients are tracked; beyond it the oldest
	// window is forgotten. Zero: 10,000.
	Clients int
}

// DefaultFailureLimit is what a zero FailureLimit means.
var DefaultFailureLimit = FailureLimit{Max: 10, Window: 10 * time.Second, Clients: 10000}

type failureLimiter struct {
	lim FailureLimit
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	clients map[string]*failureWindow
}

type failureWindow struct {
	start   time.Time
	count   int
	refused int  // requests answered 429 in this window
	logged  bool // the window's log line was written
}

func newFailureLimiter(lim FailureLimit, log *slog.Logger) *failureLimiter {
	d := DefaultFailureLimit
	if lim.Max == 0 {
		lim.Max = d.Max
	}
	if lim.Window <= 0 {
		lim.Window = d.Window
	}
	if lim.Clients <= 0 {
		lim.Clients = d.Clients
	}
	return &failureLimiter{lim: lim, log: log, now: time.Now, clients: map[string]*failureWindow{}}
}

// blocked returns how long client must wait, or 0.
func (f *failureLimiter) blocked(client string) time.Duration {
	if f.lim.Max < 0 {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.current(client, false)
	if w == nil || w.count < f.lim.Max {
		return 0
	}
	w.refused++
	return w.start.Add(f.lim.Window).Sub(f.now())
}

// fail records a wrong token from client.
func (f *failureLimiter) fail(client string) {
	if f.lim.Max < 0 {
		return
	}
	f.mu.Lock()
	w := f.current(client, true)
	w.count++
	logNow := w.count == f.lim.Max && !w.logged
	if logNow {
		w.logged = true
	}
	count, window := w.count, f.lim.Window
	f.mu.Unlock()
	if logNow && f.log != nil {
		f.log.Warn("wrong API tokens from one client: slowing it down (429) until its window ends",
			"client", client, "failures", count, "window", window)
	}
}

// current returns client's window, starting a new one when it is over.
// Called with mu held.
func (f *failureLimiter) current(client string, create bool) *failureWindow {
	now := f.now()
	w := f.clients[client]
	if w != nil && now.Sub(w.start) >= f.lim.Window {
		if w.refused > 0 && f.log != nil {
			f.log.Info("client slowed for wrong API tokens: window over", "client", client,
				"failures", w.count, "refused", w.refused)
		}
		delete(f.clients, client)
		w = nil
	}
	if w == nil && create {
		if len(f.clients) >= f.lim.Clients {
			f.evict(now)
		}
		w = &failureWindow{start: now}
		f.clients[client] = w
	}
	return w
}

// evict drops finished windows, or the oldest when none has finished.
func (f *failureLimiter) evict(now time.Time) {
	var oldest string
	for c, w := range f.clients {
		if now.Sub(w.start) >= f.lim.Window {
			delete(f.clients, c)
		} else if oldest == "" || w.start.Before(f.clients[oldest].start) {
			oldest = c
		}
	}
	if len(f.clients) >= f.lim.Clients && oldest != "" {
		delete(f.clients, oldest)
	}
}
