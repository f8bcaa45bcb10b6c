// Package cfgerr is the one error type of a config section's Validate: the
// field's key (relative to the section) and what is wrong with it, so a
// config loader positions the error at the field's line without reading
// its text. The root package re-exports it as axocoatl.ConfigError and
// ErrInvalidConfig; it lives here because agent and agent/provider, below
// the root package, validate their sections too.
package cfgerr

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every *Error.
var ErrInvalid = errors.New("invalid config")

// Error is one problem with one field of a config section.
type Error struct {
	// Key is the field's YAML key relative to the validated value:
	// "timeout", "rules[2].decision", or "" for the value as a whole (a
	// required field is reported on its entry: "name is required").
	Key string
	// Msg says what is wrong, without the key.
	Msg string
}

func (e *Error) Error() string {
	if e.Key == "" {
		return e.Msg
	}
	return e.Key + ": " + e.Msg
}

// Is makes every Error match ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Errorf is an *Error about key.
func Errorf(key, format string, args ...any) error {
	return &Error{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// At puts the errors in err (joined ones too) under prefix, a key such as
// "webhooks[2]": an *Error's key becomes prefix.key; another error becomes
// an *Error at prefix with its text as the message. Nil stays nil.
func At(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range Split(err) {
		out = append(out, &Error{Key: Join(prefix, e.Key), Msg: e.Msg})
	}
	if len(out) == 1 {
		return out[0]
	}
	return errors.Join(out...)
}

// Split lists the problems in err: the *Error of each error joined in it
// (errors.Join, and wrapping with %w), or one with an empty key and the
// error's text for an error that is no *Error.
func Split(err error) []*Error {
	var out []*Error
	for _, leaf := range Leaves(err) {
		var e *Error
		if !errors.As(leaf, &e) {
			e = &Error{Msg: leaf.Error()}
		}
		out = append(out, e)
	}
	return out
}

// Leaves lists the errors joined in err (errors.Join, nested too), or err
// alone when it joins none; nil for nil.
func Leaves(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, Leaves(e)...)
	}
	return out
}

// Check is one value NotNegative looks at.
type Check struct {
	key      string
	negative bool
}

// N is the check of the value v at key.
func N[T ~int | ~int64](key string, v T) Check { return Check{key, v < 0} }

// NotNegative is "<key>: must not be negative" for the first check whose
// value is negative, nil when none is: the bound every count, size and
// duration of a section has (zero means its default).
func NotNegative(checks ...Check) error {
	for _, c := range checks {
		if c.negative {
			return Errorf(c.key, "must not be negative")
		}
	}
	return nil
}

// Join is key under prefix: "a.b", "a[1]", or either alone when the other
// is empty.
func Join(prefix, key string) string {
	switch {
	case prefix == "":
		return key
	case key == "":
		return prefix
	case strings.HasPrefix(key, "["):
		return prefix + key
	}
	return prefix + "." + key
}

// Entries validates each item of a list section: the first item's error,
// under section[i].
func Entries[T interface{ Validate() error }](section string, items []T) error {
	for i, item := range items {
		if err := item.Validate(); err != nil {
			return At(fmt.Sprintf("%s[%d]", section, i), err)
		}
	}
	return nil
}

// UniqueNames reports the first name given to two items of a list (the
// message names the entries, not the section; "" for none). Items without
// a name are not compared: each one's own check says a name is required,
// where "duplicate name \"\"" would name no mistake.
func UniqueNames[T any](items []T, name func(T) string) error {
	seen := make(map[string]int, len(items))
	for i, item := range items {
		n := name(item)
		if n == "" {
			continue
		}
		if j, dup := seen[n]; dup {
			return Errorf("", "duplicate name %q (entries %d and %d)", n, j, i)
		}
		seen[n] = i
	}
	return nil
}
