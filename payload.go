package axocoatl

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/axocoatl/axocoatl-go/agent"
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

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as encoding/json writes a string: quoted,
// with <, > and & escaped for HTML safety, invalid UTF-8 replaced by
// U+FFFD, and U+2028/U+2029 escaped for JavaScript.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
