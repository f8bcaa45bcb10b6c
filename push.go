package axocoatl

import (
	"context"
	"errors"

	"github.com/axocoatl/axocoatl-go/secret"
)

// Pusher is a module that delivers requests to URLs chosen at run time
// (A2A push notifications: a client registers where a task's updates go),
// durably, with retries, dead letters and a delivery log, as it delivers
// its configured webhooks. The egress module is one when its push
// delivery is enabled; a door that takes push configurations (a2a) finds
// it with [Engine.Pusher], so the two meet through the Engine and neither
// imports the other.
type Pusher interface {
	Module
	// Pushes reports whether the module delivers push requests now (it is
	// configured to, and running).
	Pushes() bool
	// Push queues one delivery and returns its delivery id. It does not
	// wait for the delivery: an error says only that it was not queued
	// ([ErrPushUnavailable], a full queue, an invalid request).
	Push(ctx context.Context, p PushRequest) (deliveryID string, err error)
}

// PushRequest is one delivery for a [Pusher]: the exact Body POSTed to
// URL with Header, signed by the Pusher as its webhooks are.
type PushRequest struct {
	// URL is where the body is POSTed: an absolute http or https URL.
	URL string
	// Header is added to the request (Authorization, a client's token).
	// Values are secrets: never logged, never in the delivery log.
	Header map[string]secret.Secret
	// Body is the request body, JSON.
	Body []byte
	// EventType names the delivery (X-Axocoatl-Event, the delivery log).
	EventType string
	// Subject is what the delivery is about (a task id): the delivery
	// log's event_id.
	Subject string
	// AllowPrivate lets the delivery reach loopback, private and
	// link-local addresses; without it those are refused on the address
	// dialed. A door sets it for the hosts its operator allowed.
	AllowPrivate bool
}

// ErrPushUnavailable is returned by [Pusher.Push] when push delivery is
// not configured or not running.
var ErrPushUnavailable = errors.New("axocoatl: push delivery unavailable")

// Pusher returns the first module passed to [Engine.Use] that is a
// [Pusher] and pushes now; ok is false when there is none. It is looked up
// on each call, so the order modules are attached in does not matter.
func (e *Engine) Pusher() (p Pusher, ok bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, m := range e.modules {
		if p, ok := m.(Pusher); ok && p.Pushes() {
			return p, true
		}
	}
	return nil, false
}
