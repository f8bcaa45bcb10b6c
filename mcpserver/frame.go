package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// frameLimits bound what one message may hold beyond its bytes: a message
// costs its decoder per value and per level, not per byte (88,000 keys of
// _meta in 3.6 MiB took the go-sdk 44 times their bytes in allocations).
// 0: no bound.
type frameLimits struct {
	values int // JSON values: the message, every object member and array element
	depth  int // nesting of objects and arrays
}

// frameInfo is what scanFrame learns of a frame in its one pass.
type frameInfo struct {
	// The raw values of the top-level object's members (the last of a
	// name, as a decoder takes it); nil when absent.
	id, method, params, jsonrpc []byte
	hasID                       bool
	// meta is params._meta, progressToken params._meta.progressToken.
	meta, progressToken []byte
	// odd: not the plain shape decode reads by itself (a top-level member
	// name escaped or repeated, a result or error member, a method or id
	// that is not a plain string or integer): the go-sdk's decoder reads it.
	odd bool
	// tooMany, tooDeep: over frameLimits.
	tooMany, tooDeep bool
}

// scanFrame validates frame (JSON, as json.Valid), counts its values and
// depth against lim and notes the members checkFrame and precheckPOST
// need, in one pass that allocates nothing. ok false: not JSON.
func scanFrame(frame []byte, lim frameLimits) (info frameInfo, ok bool) {
	s := frameScanner{b: frame, lim: lim, info: &info}
	s.space()
	ok = s.value(0, roleTop)
	s.space()
	ok = ok && s.i == len(frame)
	if s.tooDeep {
		// Past the depth bound the scanner skips without validating (a
		// stack as deep as the input is what the bound refuses); json.Valid
		// keeps its own.
		ok = json.Valid(frame)
	}
	info.tooDeep = s.tooDeep
	info.tooMany = lim.values > 0 && s.values > lim.values
	return info, ok
}

// overLimits is the error of a frame over lim, nil when it is within.
func (info *frameInfo) overLimits(lim frameLimits) *frameError {
	if info.tooMany {
		return &frameError{code: jsonrpc.CodeInvalidRequest, message: fmt.Sprintf("Invalid Request: message holds more than %d JSON values (max_message_values)", lim.values), id: idLiteral(info.id)}
	}
	if info.tooDeep {
		return &frameError{code: jsonrpc.CodeInvalidRequest, message: fmt.Sprintf("Invalid Request: message nests deeper than %d levels (max_message_depth)", lim.depth), id: idLiteral(info.id)}
	}
	return nil
}

// Where an object sits, for the members scanFrame notes.
const (
	roleOther = iota
	roleTop
	roleParams
	roleMeta
)

type frameScanner struct {
	b       []byte
	i       int
	lim     frameLimits
	values  int
	tooDeep bool
	info    *frameInfo
}

func (s *frameScanner) space() { s.i = skipSpace(s.b, s.i) }

// value scans the value at s.i; depth is its container's.
func (s *frameScanner) value(depth, role int) bool {
	s.values++
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{' || c == '[':
		if s.lim.depth > 0 && depth+1 > s.lim.depth {
			s.tooDeep = true
			s.i = skipValue(s.b, s.i)
			return true
		}
		if c == '{' {
			return s.object(depth+1, role)
		}
		return s.array(depth + 1)
	case c == '"':
		return s.str()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

func (s *frameScanner) object(depth, role int) bool {
	if s.open('}') {
		return true
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		start := s.i
		if !s.str() {
			return false
		}
		key := s.b[start:s.i]
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		child := roleOther
		switch {
		case role == roleTop && keyIs(key, "params"):
			child = roleParams
			s.info.meta, s.info.progressToken = nil, nil // the last params counts
		case role == roleParams && keyIs(key, "_meta"):
			child = roleMeta
			s.info.progressToken = nil
		}
		vstart := s.i
		if !s.value(depth, child) {
			return false
		}
		s.member(role, key, s.b[vstart:s.i])
		if more, ok := s.separator('}'); !more {
			return ok
		}
	}
}

// open steps into an object or array, reporting whether it is empty
// (then it is stepped over whole).
func (s *frameScanner) open(closer byte) (empty bool) {
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == closer {
		s.i++
		return true
	}
	return false
}

// separator reads what follows a member or element: a comma (more come)
// or the container's closer; ok false: neither.
func (s *frameScanner) separator(closer byte) (more, ok bool) {
	s.space()
	if s.i >= len(s.b) {
		return false, false
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		s.space()
		return true, true
	case closer:
		s.i++
		return false, true
	}
	return false, false
}

// member notes a member of an object in role.
func (s *frameScanner) member(role int, key, v []byte) {
	in := s.info
	switch role {
	case roleTop:
		name := string(key[1 : len(key)-1])
		if bytes.IndexByte(key, '\\') >= 0 {
			in.odd = true // the decoder reads the message (and its error names the id)
			if json.Unmarshal(key, &name) != nil {
				return
			}
		}
		var slot *[]byte
		switch name {
		case "id":
			slot = &in.id
			in.hasID = true
		case "method":
			slot = &in.method
		case "params":
			slot = &in.params
		case "jsonrpc":
			slot = &in.jsonrpc
		case "result", "error":
			in.odd = true
			return
		default:
			return
		}
		if *slot != nil {
			in.odd = true
		}
		*slot = v
	case roleParams:
		if keyIs(key, "_meta") {
			in.meta = v
		}
	case roleMeta:
		if keyIs(key, "progressToken") {
			in.progressToken = v
		}
	}
}

func (s *frameScanner) array(depth int) bool {
	if s.open(']') {
		return true
	}
	for {
		if !s.value(depth, roleOther) {
			return false
		}
		if more, ok := s.separator(']'); !more {
			return ok
		}
	}
}

// str scans a string (s.b[s.i] is '"') as JSON's grammar has it: no
// control characters, only the defined escapes.
func (s *frameScanner) str() bool {
	b := s.b
	for j := s.i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s.i = j + 1
			return true
		case c == '\\':
			j++
			if j >= len(b) {
				return false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) {
					return false
				}
				for _, h := range b[j+1 : j+5] {
					if !isHex(h) {
						return false
					}
				}
				j += 4
			default:
				return false
			}
		case c < 0x20:
			return false
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (s *frameScanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *frameScanner) number() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if j := digits(b, i); j > i {
			i = j
		} else {
			return false
		}
	}
	s.i = i
	return true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// decode returns the message frame holds, frame being scanned into info
// (valid JSON, within the limits). A request of the plain shape (every
// client's calls and notifications: "jsonrpc":"2.0", a method and id
// without escapes, each member once) is built from what the scan noted,
// as the go-sdk's decoder would build it; anything else is left to that
// decoder, so that both read every frame alike (a frame the go-sdk's stdio
// reader cannot decode ends its session).
func (info *frameInfo) decode(frame []byte) (jsonrpc.Message, error) {
	if info.odd || string(info.jsonrpc) != `"2.0"` || !plainString(info.method) {
		return jsonrpc.DecodeMessage(frame)
	}
	var id jsonrpc.ID
	switch raw := info.id; {
	case raw == nil || string(raw) == "null":
	case plainString(raw):
		id, _ = jsonrpc.MakeID(string(raw[1 : len(raw)-1]))
	case raw[0] != '"' && exactIntID(raw):
		v, _ := strconv.ParseInt(string(raw), 10, 64)
		id, _ = jsonrpc.MakeID(float64(v)) // a float64, as the decoder reads a number
	default:
		return jsonrpc.DecodeMessage(frame)
	}
	var params json.RawMessage
	if info.params != nil {
		params = json.RawMessage(info.params)
	}
	return &jsonrpc.Request{ID: id, Method: string(info.method[1 : len(info.method)-1]), Params: params}, nil
}

// plainString reports whether raw is a JSON string without escapes whose
// bytes are valid UTF-8: its contents are its value as decoded.
func plainString(raw []byte) bool {
	return len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw[1:len(raw)-1])
}
