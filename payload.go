package axocoatl

import (
	"strconv"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/jsonio"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// The Engine publishes four to six events per task, on the hot path of every
// door. Their payloads have fixed shapes, so they are written by hand:
// encoding/json's reflection was half the cost of a tool call's bookkeeping.
// The output is byte-for-byte what json.Marshal gives (checked by a fuzz test).

// payload builds one JSON object.
type payload struct{ b []byte }

func newPayload() payload { return payload{b: make([]byte, 0, 128)} }

func (p *payload) key(k string) {
	if len(p.b) == 0 {
		p.b = append(p.b, '{')
	} else {
		p.b = append(p.b, ',')
	}
	p.b = append(p.b, '"')
	p.b = append(p.b, k...) // keys are constants that need no escaping
	p.b = append(p.b, '"', ':')
}

func (p *payload) str(k, v string) *payload {
	p.key(k)
	p.b = appendJSONString(p.b, v)
	return p
}

func (p *payload) strs(k string, v []string) *payload {
	p.key(k)
	p.b = append(p.b, '[')
	for i, s := range v {
		if i > 0 {
			p.b = append(p.b, ',')
		}
		p.b = appendJSONString(p.b, s)
	}
	p.b = append(p.b, ']')
	return p
}

func (p *payload) int(k string, v int64) *payload {
	p.key(k)
	p.b = strconv.AppendInt(p.b, v, 10)
	return p
}

func (p *payload) bool(k string, v bool) *payload {
	p.key(k)
	p.b = strconv.AppendBool(p.b, v)
	return p
}

// usage writes "model" (when known) and "usage" with all three counts.
func (p *payload) usage(model string, u agent.Usage) *payload {
	if model != "" {
		p.str("model", model)
	}
	p.key("usage")
	p.b = append(p.b, `{"input_tokens":`...)
	p.b = strconv.AppendInt(p.b, u.InputTokens, 10)
	p.b = append(p.b, `,"output_tokens":`...)
	p.b = strconv.AppendInt(p.b, u.OutputTokens, 10)
	p.b = append(p.b, `,"cached_input_tokens":`...)
	p.b = strconv.AppendInt(p.b, u.CachedInputTokens, 10)
	p.b = append(p.b, '}')
	return p
}

func (p *payload) done() []byte {
	if len(p.b) == 0 {
		return []byte("{}")
	}
	return append(p.b, '}')
}

// split ends the payload and returns its bytes, capacity capped so that
// nothing appended later can reach them, and an empty payload that writes
// into the rest of the same buffer.
func (p *payload) split() ([]byte, payload) {
	b := p.done()
	return b[:len(b):len(b)], payload{b: b[len(b):]}
}

// event wraps a payload the Engine built itself, so it skips the validation
// lattice.New gives payloads from elsewhere.
func event(eventType, producedBy string, now time.Time, payload []byte) lattice.Event {
	return lattice.Event{ID: lattice.NewID(now), Type: eventType, ProducedBy: producedBy, Timestamp: now.Unix(), Payload: payload, Class: coreClass(eventType)}
}

// appendJSONString appends s as encoding/json writes a string
// ([jsonio.AppendString]).
func appendJSONString(dst []byte, s string) []byte { return jsonio.AppendString(dst, s) }
