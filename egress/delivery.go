package egress

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/axocoatl/axocoatl-go/lattice"
)

// Status is where a delivery stands.
type Status string

// Statuses of a delivery, as the API reports them.
const (
	// StatusQueued: waiting for a free sender (also after a restart, for
	// deliveries that were in flight when the process ended).
	StatusQueued Status = "queued"
	// StatusInFlight: being sent, or waiting between attempts.
	StatusInFlight Status = "in_flight"
	// StatusDelivered: the receiver answered 2xx.
	StatusDelivered Status = "delivered"
	// StatusFailed: the receiver answered with a status that is not
	// retried (3xx, 4xx other than 429), or the request cannot be made;
	// kept with the dead letters and retryable through the API.
	StatusFailed Status = "failed"
	// StatusDeadLettered: every attempt failed with a retryable error;
	// kept and retryable through the API.
	StatusDeadLettered Status = "dead_lettered"
)

func validStatus(s string) bool {
	switch Status(s) {
	case StatusQueued, StatusInFlight, StatusDelivered, StatusFailed, StatusDeadLettered:
		return true
	}
	return false
}

// Attempt is one try of a delivery.
type Attempt struct {
	At time.Time `json:"at"`
	// StatusCode is the receiver's HTTP status; 0 when there was no
	// response (connection error, timeout).
	StatusCode int     `json:"status_code"`
	LatencyMS  float64 `json:"latency_ms"`
	// Error says why the attempt failed ("HTTP 503", "timeout after 10s",
	// a connection error); empty on success. It never holds the URL's
	// query or a header value.
	Error string `json:"error,omitempty"`
}

// Delivery is one event on its way to one webhook, as the API shows it.
type Delivery struct {
	// ID is the delivery_id of the body and X-Axocoatl-Delivery: the same
	// on every attempt, after a restart and after a retry through the API.
	ID        string    `json:"delivery_id"`
	Webhook   string    `json:"webhook"`
	EventID   string    `json:"event_id"`
	EventType string    `json:"event_type"`
	Status    Status    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	// Attempts are the tries so far, oldest first (at most the last 64).
	Attempts  []Attempt `json:"attempts"`
	LastError string    `json:"last_error,omitempty"`
}

// maxAttemptHistory bounds the attempts remembered per delivery (retries
// through the API could otherwise grow it without bound).
const maxAttemptHistory = 64

// delivery is the module's record of one delivery. id, eventType, body
// and created never change; the rest is guarded by its hook's mu.
type delivery struct {
	id        string
	eventID   string
	eventType string
	body      []byte
	created   time.Time

	key      uint64 // position in the store: deliveries are resent in key order
	seq      uint64 // JetStream: the stream sequence of the message being sent
	status   Status
	attempts []Attempt
	// base is the number of attempts made before the last retry through
	// the API; MaxAttempts counts from it.
	base      int
	lastError string

	// A push delivery ([Module.Push]) carries where it goes and its
	// headers (secret values: never in a view or a log line).
	url          string
	header       map[string]string
	allowPrivate bool

	// traceParent and traceState are the W3C trace context of the run
	// whose event this delivery is (empty: none): the parent of its
	// attempts' spans, stored and queued with it.
	traceParent, traceState string
}

// wireBody is the body of every request, per the contract.
type wireBody struct {
	DeliveryID string          `json:"delivery_id"`
	EventID    string          `json:"event_id"`
	EventType  string          `json:"event_type"`
	ProducedBy string          `json:"produced_by"`
	Timestamp  int64           `json:"timestamp"`
	Payload    json.RawMessage `json:"payload"`
}

var emptyObject = json.RawMessage("{}")

// newDelivery serializes the body once: the bytes stored, signed and sent
// are these.
func newDelivery(ev lattice.Event, now time.Time) (*delivery, error) {
	id := lattice.NewID(now)
	p := ev.Payload
	if len(p) == 0 {
		p = emptyObject
	}
	body, err := json.Marshal(wireBody{DeliveryID: id, EventID: ev.ID, EventType: ev.Type,
		ProducedBy: ev.ProducedBy, Timestamp: ev.Timestamp, Payload: p})
	if err != nil {
		return nil, err
	}
	d := &delivery{id: id, eventID: ev.ID, eventType: ev.Type, body: body, created: now, status: StatusQueued}
	d.traceOf(ev)
	return d, nil
}

// view copies the delivery for the API; the hook's mu is held.
func (d *delivery) view(webhook string) Delivery {
	return Delivery{ID: d.id, Webhook: webhook, EventID: d.eventID, EventType: d.eventType, Status: d.status,
		CreatedAt: d.created, Attempts: slices.Clone(d.attempts), LastError: d.lastError}
}

// record is the stored form of a delivery.
type record struct {
	ID        string    `json:"id"`
	EventID   string    `json:"event_id"`
	EventType string    `json:"event_type"`
	Created   time.Time `json:"created"`
	Status    Status    `json:"status"`
	Attempts  []Attempt `json:"attempts,omitempty"`
	Base      int       `json:"base,omitempty"`
	LastError string    `json:"last_error,omitempty"`
	Body      []byte    `json:"body"`
	// A push delivery's target and headers (plain values: a
	// secret.Secret would be stored redacted).
	URL          string            `json:"url,omitempty"`
	Header       map[string]string `json:"header,omitempty"`
	AllowPrivate bool              `json:"allow_private,omitempty"`
	// The trace context of the event's run (absent in a store written
	// before it was kept: such a delivery has no parent trace).
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// record copies what is stored; the hook's mu is held (or the delivery is
// not shared yet).
func (d *delivery) record() record {
	return record{ID: d.id, EventID: d.eventID, EventType: d.eventType, Created: d.created, Status: d.status,
		Attempts: slices.Clone(d.attempts), Base: d.base, LastError: d.lastError, Body: d.body,
		URL: d.url, Header: cloneHeader(d.header), AllowPrivate: d.allowPrivate,
		TraceParent: d.traceParent, TraceState: d.traceState}
}

func (r record) delivery(key uint64) *delivery {
	d := r.untraced(key)
	// A JetStream dead letter may be written by any process of the
	// cluster: bounded like a peer's.
	d.traceOf(lattice.Event{TraceParent: r.TraceParent, TraceState: r.TraceState})
	return d
}

func (r record) untraced(key uint64) *delivery {
	return &delivery{id: r.ID, eventID: r.EventID, eventType: r.EventType, body: r.Body, created: r.Created,
		key: key, status: r.Status, attempts: r.Attempts, base: r.Base, lastError: r.LastError,
		url: r.URL, header: r.Header, allowPrivate: r.AllowPrivate,
	}
}
