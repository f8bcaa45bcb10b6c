// Package scrub removes known secret values (header values, tokens, URL
// credentials, the host's own keys) from text that came from outside (a
// peer's answer, a child's stderr, Go's HTTP errors, which quote whole
// URLs) before a model, a log line, an event or an error sees it. The
// modules decide which values are secret; the replacement rule is here,
// once.
//
// The rule: a value of MinLen characters or more is replaced by Mark
// wherever it appears, except that one shorter than WordOnlyBelow is
// replaced only where it stands as a word of its own (not inside a longer
// run of letters and digits), because a short value such as "w9Zq" or
// "prod" would otherwise be cut out of unrelated words. Values are
// replaced longest first, so a value containing another is replaced whole.
package scrub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/axocoatl/axocoatl-go/internal/redact"
)

const (
	// MinLen is the shortest configured secret that is scrubbed: a shorter
	// one ("1", "yes") cannot be removed without garbling every text. It is
	// left as is; Values.TooShort names it so that the module can warn.
	MinLen = 4
	// WordOnlyBelow: values shorter than this are replaced only as words.
	WordOnlyBelow = 8
	// Mark is what a secret is replaced with.
	Mark = "[redacted]"
	// minURLPart is the shortest URL query or password that is scrubbed:
	// "k=v" is already a credential's shape, and as it is under
	// WordOnlyBelow it is replaced only as a word.
	minURLPart = 3
)

// Values collects the secret values a Scrubber removes. The zero value is
// empty and ready to use.
type Values struct {
	vals     []string
	tooShort []string
}

// Secret adds a configured secret value. key names it in TooShort ("",
// for a value not configured by the user, is never reported). A value with
// a space ("Bearer <token>") also adds what follows the first space: the
// token alone may be echoed too.
func (v *Values) Secret(key, s string) {
	if len(s) >= MinLen {
		v.vals = append(v.vals, s)
	} else if s != "" && key != "" {
		v.tooShort = append(v.tooShort, key)
	}
	if _, tok, ok := strings.Cut(s, " "); ok && len(tok) >= MinLen {
		v.vals = append(v.vals, tok)
	}
}

// URL adds the parts of a peer's URL that often carry credentials: its
// query (?api_key=…), its password, its user name (a token is often the
// whole userinfo, https://TOKEN@host, and Go's HTTP errors mask only a
// password) and its path segments that look like keys (/mcp/<key>/sse,
// see redact.CredentialLike). Go's HTTP errors quote the whole URL.
func (v *Values) URL(raw string) {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return
	}
	if len(u.RawQuery) >= minURLPart {
		v.vals = append(v.vals, u.RawQuery)
	}
	if p, ok := u.User.Password(); ok && len(p) >= minURLPart {
		v.vals = append(v.vals, p)
	}
	if name := u.User.Username(); len(name) >= MinLen {
		v.vals = append(v.vals, name)
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		if redact.CredentialLike(seg) {
			v.vals = append(v.vals, seg)
		}
	}
}

// TooShort names the configured values (by the key given to Secret) that
// are not scrubbed because they are shorter than MinLen.
func (v *Values) TooShort() []string { return slices.Clone(v.tooShort) }

// Scrubber returns the Scrubber of the values added so far.
func (v *Values) Scrubber() *Scrubber { return New(v.vals...) }

// Scrubber replaces secret values in text. It is immutable and safe for
// concurrent use; a nil *Scrubber scrubs nothing.
type Scrubber struct {
	values []value
}

type value struct {
	s    string
	b    []byte // s, for documents that arrive as bytes
	word bool   // replace only where it stands as a word
}

// New returns a Scrubber of values, taken as they are: values shorter than
// MinLen are not dropped here (Values.Secret drops them), empty ones are.
func New(values ...string) *Scrubber {
	vals := slices.DeleteFunc(slices.Clone(values), func(s string) bool { return s == "" })
	// Longest first, so a value containing another is replaced whole.
	sort.Slice(vals, func(i, j int) bool {
		if len(vals[i]) != len(vals[j]) {
			return len(vals[i]) > len(vals[j])
		}
		return vals[i] < vals[j]
	})
	vals = slices.Compact(vals) // the same value may be configured twice
	sc := &Scrubber{values: make([]value, len(vals))}
	for i, s := range vals {
		sc.values[i] = value{s: s, b: []byte(s), word: len(s) < WordOnlyBelow}
	}
	return sc
}

// Empty reports whether sc scrubs nothing.
func (sc *Scrubber) Empty() bool { return sc == nil || len(sc.values) == 0 }

// String returns s with every secret value replaced by Mark. Text without
// any costs a search per value and no allocation.
func (sc *Scrubber) String(s string) string {
	if sc == nil {
		return s
	}
	for _, v := range sc.values {
		if !strings.Contains(s, v.s) {
			continue
		}
		if v.word {
			s = replaceWord(s, v.s)
		} else {
			s = strings.ReplaceAll(s, v.s, Mark)
		}
	}
	return s
}

// Bytes is String for a document that arrives as bytes (a JSON tool
// result). Without a secret in it, b itself is returned, with no
// allocation.
func (sc *Scrubber) Bytes(b []byte) []byte {
	if sc == nil {
		return b
	}
	for _, v := range sc.values {
		if bytes.Contains(b, v.b) {
			return []byte(sc.String(string(b)))
		}
	}
	return b
}

// Error returns err with its message scrubbed, or err itself when its
// message holds no secret. The scrubbed error answers errors.Is as err
// does (every sentinel of its chain: context.Canceled, io.EOF, a module's
// own), but it does not unwrap to err and does not answer errors.As:
// both would hand out the original, whose message (or a field, such as
// url.Error's URL) holds the secret.
func (sc *Scrubber) Error(err error) error {
	if err == nil || sc == nil {
		return err
	}
	msg := err.Error()
	red := sc.String(msg)
	if red == msg {
		return err
	}
	return &scrubbedError{msg: red, orig: err}
}

type scrubbedError struct {
	msg  string
	orig error
}

func (e *scrubbedError) Error() string { return e.msg }

// Is answers for err's whole chain; it reveals no text.
func (e *scrubbedError) Is(target error) bool { return errors.Is(e.orig, target) }

// Logger returns log with every record scrubbed: its message, every string
// attribute and the text of every other value (errors are printed by the
// handler). A library that logs on its own (the MCP go-sdk quotes Go's HTTP
// errors, hence whole URLs) is given this logger.
func (sc *Scrubber) Logger(log *slog.Logger) *slog.Logger {
	if sc.Empty() {
		return log
	}
	return slog.New(&handler{inner: log.Handler(), sc: sc})
}

type handler struct {
	inner slog.Handler
	sc    *Scrubber
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.sc.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = h.attr(a)
	}
	return &handler{inner: h.inner.WithAttrs(red), sc: h.sc}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{inner: h.inner.WithGroup(name), sc: h.sc}
}

func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.sc.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]slog.Attr, len(g))
		for i, ga := range g {
			red[i] = h.attr(ga)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(red...)}
	case slog.KindAny:
		s := fmt.Sprint(v.Any())
		if red := h.sc.String(s); red != s {
			return slog.String(a.Key, red)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// replaceWord replaces v in s where it is not part of a longer run of
// letters and digits.
func replaceWord(s, v string) string {
	var b strings.Builder
	done := 0 // s[:done] is written to b
	for i := 0; ; {
		j := strings.Index(s[i:], v)
		if j < 0 {
			break
		}
		j += i
		end := j + len(v)
		if !wordRuneBefore(s, j) && !wordRuneAt(s, end) {
			if done == 0 {
				b.Grow(len(s))
			}
			b.WriteString(s[done:j])
			b.WriteString(Mark)
			done = end
			i = end
		} else {
			i = j + 1
		}
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// isWordRune: letters and digits. An invalid byte (utf8.RuneError) is not
// a letter, so it bounds a word.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func wordRuneBefore(s string, i int) bool {
	if i == 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return isWordRune(r)
}

func wordRuneAt(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return isWordRune(r)
}
