package axocoatl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrBadInput is matched by every error of [ParseInput]: a tool's arguments
// are not {"input": "<text>"}.
var ErrBadInput = errors.New(`tool input must be {"input": "<text>"}`)

// ParseInput reads the arguments of a tool taking {"input": "<text>"}, the
// schema {"type":"object","properties":{"input":{"type":"string"}},
// "required":["input"]} of the Engine's agents as tools (mcpserver's
// agent_<id>) and of remote agents as tools (a2aremote's a2a__<name>).
//
// As the schema says: the arguments are an object, other properties are
// ignored, and "input" is required and a string. So {"input": null} is
// refused (null is not a string, though encoding/json would decode it as
// "" or as absent), and the key matches exactly ({"INPUT": "x"}, which
// encoding/json's case-insensitive field match would take, is missing it).
// Of a key written twice the last counts, as encoding/json does. Errors
// wrap [ErrBadInput] and say which rule failed.
func ParseInput(args json.RawMessage) (string, error) {
	if s, ok := plainInput(args); ok {
		return s, nil
	}
	var obj map[string]json.RawMessage
	if len(bytes.TrimLeft(args, jsonSpace)) == 0 || string(bytes.Trim(args, jsonSpace)) == "null" {
		return "", fmt.Errorf(`%w: missing required property "input"`, ErrBadInput)
	}
	if err := json.Unmarshal(args, &obj); err != nil {
		return "", fmt.Errorf(`%w: must be an object with a string property "input"`, ErrBadInput)
	}
	raw, ok := obj["input"]
	if !ok {
		return "", fmt.Errorf(`%w: missing required property "input"`, ErrBadInput)
	}
	var input string
	// null decodes into a string without error: refuse it by hand.
	if err := json.Unmarshal(raw, &input); err != nil || string(raw) == "null" {
		return "", fmt.Errorf(`%w: property "input" must be a string`, ErrBadInput)
	}
	return input, nil
}

// plainInput reads args of exactly the shape {"input": "<text>"} (JSON
// whitespace allowed between tokens) whose text has no escape, control
// character or invalid UTF-8, so that it decodes to itself. It is what
// models send; encoding/json took a third of a2aremote's own CPU per call
// for it. Any other shape is left to encoding/json (ok false).
func plainInput(b []byte) (text string, ok bool) {
	b, ok = afterToken(b, "{")
	if ok {
		b, ok = afterToken(b, `"input"`)
	}
	if ok {
		b, ok = afterToken(b, ":")
	}
	if ok {
		b, ok = afterToken(b, `"`)
	}
	end := bytes.IndexByte(b, '"')
	if !ok || end < 0 {
		return "", false
	}
	raw := b[:end]
	for _, c := range raw {
		if c == '\\' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(raw) {
		return "", false
	}
	if rest, ok := afterToken(b[end+1:], "}"); !ok || len(bytes.TrimLeft(rest, jsonSpace)) > 0 {
		return "", false
	}
	return string(raw), true
}

const jsonSpace = " \t\r\n"

// afterToken skips JSON whitespace, then tok.
func afterToken(b []byte, tok string) ([]byte, bool) {
	return bytes.CutPrefix(bytes.TrimLeft(b, jsonSpace), []byte(tok))
}
