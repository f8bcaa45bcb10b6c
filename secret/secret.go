// Package secret holds a string type for credentials that never prints itself.
//
// A [Secret] formats as "[redacted]" through fmt ([Secret.String],
// [Secret.GoString]), log/slog ([Secret.LogValue]) and encoding/json and text
// encoders ([Secret.MarshalJSON], [Secret.MarshalText]), so a config struct
// can be logged or returned in an error without leaking keys; an empty
// Secret formats as "". It decodes as a plain string, so a YAML or JSON
// config reads it as any other field. Code that needs the value calls
// [Secret.Reveal], which makes every use greppable.
package secret

import "log/slog"

// Secret is a credential: an API key, a token, a webhook secret, a header value.
type Secret string

const redacted = "[redacted]"

// Reveal returns the value. Call it only where the value goes on the wire.
func (s Secret) Reveal() string { return string(s) }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s == "" }

// String implements fmt.Stringer.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString implements fmt.GoStringer so %#v does not leak either.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON never emits the value.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// MarshalText never emits the value (used by YAML and TOML encoders).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
