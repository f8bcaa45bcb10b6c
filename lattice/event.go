// Package lattice is the event bus every Axocoatl module talks through.
//
// An [Event] is a typed JSON object with an id that sorts by time ([NewID]),
// built with [New]. A [Bus] fans events out to subscribers, each with its
// own bounded buffer (a [Subscription], [DefaultBuffer] events unless the
// subscriber asks for another size): a slow subscriber misses events (and
// can count them with [Subscription.Missed]), it never slows anyone else.
//
// The Engine owns one Bus: the in-process [Memory] bus ([NewMemory]) unless
// the host passes another, such as the NATS bus of package lattice/nats,
// which lets the daemons of a cluster share one lattice. The Engine
// publishes the events of every run (its start, its end, its tool calls)
// and modules publish their own; each publisher declares its types and
// their classes, the bus names none. Observers subscribe with a [Filter]
// that selects by type glob, by [Class] (coordination or telemetry) and,
// on a shared lattice, by origin ([Filter].Local). A [History] keeps the
// latest events for a view that opens late. The package imports nothing of
// the house, so every other package can import it.
package lattice

import (
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"time"
	"unicode/utf8"
)

// Event is one fact published on the lattice. Its JSON form is the wire shape
// of the contract: {"id","type","produced_by","timestamp","payload"}.
type Event struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	ProducedBy string          `json:"produced_by"`
	Timestamp  int64           `json:"timestamp"` // unix seconds
	Payload    json.RawMessage `json:"payload"`   // a JSON object
	// Class is what the publisher declares the event to be; a [Filter]'s
	// Class selects by it. Zero ([ClassAny]) means coordination, the class
	// of every event whose publisher declares none. It is not part of the
	// JSON form: a Bus over a network carries it beside the event
	// (lattice/nats: the ClassHeader header). The bus names no event
	// type: the Engine and each module declare the classes of their own.
	Class Class `json:"-"`
	// TraceParent and TraceState are the W3C trace context (the
	// traceparent and tracestate values) of the run or request that
	// published the event; empty when it had none. The Engine sets them
	// from the publishing context. Like Class they are not part of the
	// JSON form: a Bus over a network carries them beside the event
	// (lattice/nats: the traceparent and tracestate headers), and an
	// observer that carries the event further (a webhook delivery)
	// continues the trace with them.
	TraceParent string `json:"-"`
	TraceState  string `json:"-"`
	// Node is the node a Bus over a network says the event came from
	// (lattice/nats: its own node for the events it published, the
	// NodeHeader header for the others'); empty on the in-memory bus. Like
	// Class it is not part of the JSON form, and a publisher's is ignored.
	Node string `json:"-"`
	// Unverified marks an event a Bus delivered without proof that Node
	// published it: lattice/nats with a cluster key takes the event types
	// its Options.ObserveOnly names without a signature, so anyone who may
	// publish on the lattice could have sent it. An observer that only
	// shows events may show it (as unverified); one that acts on an event
	// (a webhook delivery) skips it. Never set on a Bus without a key,
	// where no event is verified.
	Unverified bool `json:"-"`
}

// Class separates events other systems act on (coordination) from events
// that only describe what is going on (telemetry).
type Class uint8

const (
	ClassAny Class = iota // matches every event; the zero value of a Filter
	ClassCoordination
	ClassTelemetry
)

func (c Class) String() string {
	switch c {
	case ClassCoordination:
		return "coordination"
	case ClassTelemetry:
		return "telemetry"
	}
	return "any"
}

// EffectiveClass is the class of an event as a [Filter] sees it: its Class, or
// [ClassCoordination] when it declares none.
func (e Event) EffectiveClass() Class {
	if e.Class == ClassAny {
		return ClassCoordination
	}
	return e.Class
}

// New builds an event with a fresh id and the current time. payload must
// marshal to a JSON object; nil gives {}.
func New(eventType, producedBy string, payload any) (Event, error) {
	raw, err := marshalObject(payload)
	if err != nil {
		return Event{}, fmt.Errorf("lattice: event %s: %w", eventType, err)
	}
	now := time.Now()
	return Event{ID: NewID(now), Type: eventType, ProducedBy: producedBy, Timestamp: now.Unix(), Payload: raw}, nil
}

var emptyObject = json.RawMessage("{}")

func marshalObject(payload any) (json.RawMessage, error) {
	switch p := payload.(type) {
	case nil:
		return emptyObject, nil
	case json.RawMessage:
		if len(p) == 0 {
			return emptyObject, nil
		}
		if !isObject(p) {
			return nil, fmt.Errorf("payload must be a JSON object")
		}
		return p, nil
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	if raw[0] != '{' { // Marshal's output is valid JSON: the first byte tells

		return nil, fmt.Errorf("payload must be a JSON object, got %.20s", raw)
	}
	return raw, nil
}

func isObject(raw []byte) bool {
	for _, b := range raw {
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return json.Valid(raw)
		}
		return false
	}
	return false
}

// Validate checks an event received from outside (a host, POST /api/events)
// before [Bus.Publish] takes it.
func (e Event) Validate() error {
	if e.Type == "" {
		return fmt.Errorf("event type is required")
	}
	if len(e.Type) > 128 {
		return fmt.Errorf("event type longer than 128 characters")
	}
	if len(e.Payload) > 0 && !isObject(e.Payload) {
		return fmt.Errorf("event payload must be a JSON object")
	}
	return nil
}

// Filter selects events by type, class and origin. The zero Filter matches
// all.
//
// Subscribers have one of two roles when several processes share a lattice
// (lattice/nats). One that shows everything (an event stream, a dashboard)
// takes every process's events: Local false. One that must act once per
// cluster for each event (metrics of this process's runs, webhook intake)
// takes Local: each event is then seen by the subscribers of the one
// process that published it. On the in-memory bus every event is local.
type Filter struct {
	// Types are exact event types or path.Match globs ("Task*"). Empty
	// matches any type.
	Types []string
	// Class restricts to one class; ClassAny (zero) matches both.
	Class Class
	// Local restricts to events published through this Bus instance.
	Local bool
}

// Validate reports malformed globs.
func (f Filter) Validate() error {
	for _, t := range f.Types {
		if _, err := path.Match(t, ""); err != nil {
			return fmt.Errorf("lattice: bad event filter %q: %w", t, err)
		}
	}
	return nil
}

// Match reports whether an event passes the filter (its type, and its
// class as [Event.EffectiveClass] gives it).
func (f Filter) Match(ev Event) bool {
	if f.Class != ClassAny && ev.EffectiveClass() != f.Class {
		return false
	}
	eventType := ev.Type
	if len(f.Types) == 0 {
		return true
	}
	for _, t := range f.Types {
		if t == eventType {
			return true
		}
		// An exact type that differs cannot match: skip path.Match, which
		// scans the whole pattern before it fails (every subscriber's
		// filter is checked on every event).
		if !hasMeta(t) {
			continue
		}
		if ok, _ := path.Match(t, eventType); ok {
			return true
		}
	}
	return false
}

// hasMeta reports whether a filter type has a path.Match metacharacter.
func hasMeta(t string) bool {
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '*', '?', '[', '\\':
			return true
		}
	}
	return false
}

// AppendJSON appends the event's wire form, as json.Marshal gives it (but
// for HTML escaping and the payload's whitespace, kept as it is), to b.
// It is for an event that passed [Event.Validate] (its payload is then a JSON
// object, or empty): buses that encode every event save json.Marshal's
// reflection and its second check of the payload.
func (e Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, e.ID)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"produced_by":`...)
	b = appendJSONString(b, e.ProducedBy)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, e.Timestamp, 10)
	b = append(b, `,"payload":`...)
	if len(e.Payload) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, e.Payload...)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 as U+FFFD (as encoding/json).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// MaxTraceHeaderBytes bounds a traceparent or tracestate value taken from
// outside the process (a peer's request, a NATS header): a longer one is
// ignored. 512 is W3C Trace Context's suggested limit of a tracestate.
const MaxTraceHeaderBytes = 512
