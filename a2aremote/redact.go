package a2aremote

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/axocoatl/axocoatl-go/internal/httpguard"
	"github.com/axocoatl/axocoatl-go/secret"
)

// MinRedactLen is the shortest secret value that is scrubbed: a shorter
// one ("1", "yes") cannot be removed without garbling every text. Values
// under wordOnlyBelow characters are replaced only where they stand as a
// word of their own.
const (
	MinRedactLen  = 4
	wordOnlyBelow = 8
	redactedMark  = "[redacted]"
)

// redactor removes secret values from what a remote agent says (results,
// errors) and from our own errors (Go's HTTP errors quote whole URLs)
// before the model, a log line, an event or an error sees them.
type redactor struct {
	values []string
}

// newRedactor knows the agent's header values (and the token after
// "Bearer "), its URL's userinfo, query and key-like path segments, and the
// host's credentials in scrub.
func newRedactor(a AgentConfig, scrub []secret.Secret) *redactor {
	var vals []string
	add := func(v string) {
		if len(v) >= MinRedactLen {
			vals = append(vals, v)
		}
		if _, tok, ok := strings.Cut(v, " "); ok && len(tok) >= MinRedactLen {
			vals = append(vals, tok)
		}
	}
	for _, v := range a.Headers {
		add(v.Reveal())
	}
	for _, v := range scrub {
		add(v.Reveal())
	}
	if u, err := url.Parse(a.URL); err == nil && a.URL != "" {
		if len(u.RawQuery) >= 3 {
			vals = append(vals, u.RawQuery)
		}
		if p, ok := u.User.Password(); ok && len(p) >= 3 {
			vals = append(vals, p)
		}
		if name := u.User.Username(); len(name) >= MinRedactLen {
			vals = append(vals, name)
		}
		for _, seg := range strings.Split(u.EscapedPath(), "/") {
			if httpguard.CredentialLike(seg) {
				vals = append(vals, seg)
			}
		}
	}
	// Longest first, so a value containing another is replaced whole.
	sort.Slice(vals, func(i, j int) bool {
		if len(vals[i]) != len(vals[j]) {
			return len(vals[i]) > len(vals[j])
		}
		return vals[i] < vals[j]
	})
	return &redactor{values: slices.Compact(vals)}
}

func (r *redactor) string(s string) string {
	for _, v := range r.values {
		if !strings.Contains(s, v) {
			continue
		}
		if len(v) < wordOnlyBelow {
			s = replaceWord(s, v)
		} else {
			s = strings.ReplaceAll(s, v, redactedMark)
		}
	}
	return s
}

// redactedError is an error whose message was scrubbed. It unwraps only to
// the context error the original carried (errors.Is(err,
// context.Canceled) still works), never to the original, whose message
// holds the secret.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func (r *redactor) error(err error) error {
	if err == nil {
		return nil
	}
	msg := r.string(err.Error())
	if msg == err.Error() {
		return err
	}
	var base error
	for _, e := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			base = e
		}
	}
	return &redactedError{msg: msg, err: base}
}

// replaceWord replaces v in s where it is not part of a longer run of
// letters and digits.
func replaceWord(s, v string) string {
	var b strings.Builder
	done := 0
	for i := 0; ; {
		j := strings.Index(s[i:], v)
		if j < 0 {
			break
		}
		j += i
		end := j + len(v)
		before, _ := utf8.DecodeLastRuneInString(s[:j])
		after, _ := utf8.DecodeRuneInString(s[end:])
		if !isWordRune(before) && !isWordRune(after) {
			b.WriteString(s[done:j])
			b.WriteString(redactedMark)
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

func isWordRune(r rune) bool {
	return r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r))
}
