package yamlconf

import (
	"bytes"
	"regexp"
)

// `env: { KEY: ${VAR} }` is not YAML: inside a flow collection `{` and `}`
// are indicators, so the parser stops at the `{` of `${`. Yet it is how such
// a config is naturally written (the contract's own example). Parse retries
// a document that failed with each plain scalar holding a ${…} inside a flow
// collection double-quoted; a document that parses as it is never gets
// there, and the retry is kept only if it parses, so valid YAML means what
// it always meant. Expansion still happens after parsing, in the quoted
// strings, as in any other.

// quoteFlowVars double-quotes every plain scalar that contains ${ inside a
// flow collection ({ K: ${V} }, [a, b-${B}], { Authorization: Bearer ${T} }),
// outside quoted scalars, comments and block scalars. changed is false when
// there was nothing to quote. It only inserts quote pairs, so line and key
// positions stay as they were.
func quoteFlowVars(data []byte) (out []byte, changed bool) {
	var s flowScanner
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, line := range lines {
		if q := s.line(line); q != nil {
			lines[i] = q
			changed = true
		}
	}
	if !changed {
		return data, false
	}
	return bytes.Join(lines, nil), true
}

// flowScanner carries what spans lines: an open quoted scalar, the depth of
// open flow collections, and a block scalar's indentation.
type flowScanner struct {
	quote       byte // '"' or '\'' inside a quoted scalar, else 0
	depth       int  // open { and [
	blockIndent int  // inside a block scalar: its header line's indentation plus one; else 0
}

// A block scalar header ends a line: `key: |`, `- >-`, `key: |2`.
var blockHeader = regexp.MustCompile(`(^|[\s:])[|>][-+0-9]*\s*$`)

// line scans one line and returns it with its flow scalars holding
// variables quoted, or nil when it has none.
func (s *flowScanner) line(line []byte) []byte {
	indent := len(line) - len(bytes.TrimLeft(line, " "))
	if s.blockIndent > 0 {
		if len(bytes.TrimSpace(line)) == 0 || indent >= s.blockIndent {
			return nil // block scalar text: not YAML syntax
		}
		s.blockIndent = 0
	}
	var spans [][2]int // [start, end) of each scalar to quote
	end := len(line)   // where the YAML ends (a comment starts)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch s.quote {
		case '"':
			if c == '\\' {
				i++
			} else if c == '"' {
				s.quote = 0
			}
			continue
		case '\'':
			if c == '\'' {
				if i+1 < len(line) && line[i+1] == '\'' {
					i++ // '' is an escaped quote
				} else {
					s.quote = 0
				}
			}
			continue
		}
		inFlow := s.depth > 0
		switch {
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			end, i = i, len(line)
		case (c == '}' || c == ']') && inFlow:
			s.depth--
		case !valueStart(line, i, inFlow):
			// inside a plain scalar: quotes and brackets are ordinary
		case c == '"' || c == '\'':
			s.quote = c
		case c == '{' || c == '[':
			s.depth++
		case inFlow && bytes.IndexByte([]byte(" \t\r\n,:?-&*!|>%@`"), c) < 0:
			j, hasVar := flowScalarEnd(line, i)
			if hasVar && !bytes.ContainsAny(line[i:j], `"\`) {
				spans = append(spans, [2]int{i, j})
			}
			i = j - 1
		}
	}
	if s.quote == 0 && s.depth == 0 && blockHeader.Match(bytes.TrimRight(line[:end], " \t\r\n")) {
		s.blockIndent = indent + 1
	}
	if len(spans) == 0 {
		return nil
	}
	out := make([]byte, 0, len(line)+2*len(spans))
	prev := 0
	for _, sp := range spans {
		out = append(out, line[prev:sp[0]]...)
		out = append(out, '"')
		out = append(out, line[sp[0]:sp[1]]...)
		out = append(out, '"')
		prev = sp[1]
	}
	return append(out, line[prev:]...)
}

// flowScalarEnd finds where the plain scalar starting at line[i] ends
// inside a flow collection: at , ] } or ": ", a comment or the line's end,
// stepping over each ${…} whole. hasVar reports a ${ in it.
func flowScalarEnd(line []byte, i int) (end int, hasVar bool) {
	j := i
scan:
	for j < len(line) {
		switch c := line[j]; {
		case c == '$' && j+1 < len(line) && line[j+1] == '{':
			hasVar = true
			k := bytes.IndexByte(line[j:], '}')
			if k < 0 {
				j = len(line)
				break scan
			}
			j += k + 1
			continue
		case c == ',' || c == ']' || c == '}' || c == '\r' || c == '\n':
			break scan
		case c == ':' && (j+1 == len(line) || bytes.IndexByte([]byte(" \t\r\n,]}"), line[j+1]) >= 0):
			break scan
		case c == '#' && (line[j-1] == ' ' || line[j-1] == '\t'):
			break scan
		}
		j++
	}
	for j > i && (line[j-1] == ' ' || line[j-1] == '\t') {
		j--
	}
	return j, hasVar
}

// valueStart reports whether a value can begin at line[i], judging by the
// last non-blank character before it: none (the line's start), or in block
// context ':' or '-' (key: value, - item), in a flow collection one of
// '{' '[' ',' ':'. Anywhere else line[i] is inside a plain scalar, where
// quotes and brackets are ordinary characters (don't, a {b}).
func valueStart(line []byte, i int, inFlow bool) bool {
	j := i - 1
	for j >= 0 && (line[j] == ' ' || line[j] == '\t') {
		j--
	}
	if j < 0 {
		return true
	}
	if inFlow {
		return bytes.IndexByte([]byte("{[,:"), line[j]) >= 0
	}
	return line[j] == ':' || line[j] == '-'
}
