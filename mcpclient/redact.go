package mcpclient

import (
	"bytes"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/axocoatl/axocoatl-go/secret"
)

// Redaction thresholds. Every configured secret of MinRedactLen characters
// or more is scrubbed; one shorter than wordOnlyBelow is replaced only
// where it stands as a word of its own (not inside a longer run of letters
// and digits), because a short value such as "w9Zq" or "prod" would
// otherwise be cut out of unrelated words. A configured value shorter than
// MinRedactLen cannot be scrubbed without garbling every text ("1",
// "yes"): it is left as is and the module warns, naming its key.
const (
	MinRedactLen  = 4
	wordOnlyBelow = 8
)

// redactor replaces secret values in text from outside (a child's stderr,
// a peer's error message, a tool's result) before it reaches the model,
// logs, events or errors.
type redactor struct {
	values []redactValue
	// tooShort names the configured values that are not scrubbed because
	// they are shorter than MinRedactLen ("env.DEBUG", "scrub[2]").
	tooShort []string
}

type redactValue struct {
	s    string
	b    []byte // s, for results that arrive as JSON bytes
	word bool   // replace only where it stands as a word
}

// credentialName reports whether an environment variable's name says it
// holds a credential: a stdio server that inherits the environment can
// read it and print it.
func credentialName(name string) bool {
	n := strings.ToUpper(name)
	for _, w := range []string{"TOKEN", "SECRET", "PASSW", "PASSPHRASE", "CREDENTIAL", "KEY", "AUTH", "PRIVATE", "COOKIE", "SESSION"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// newRedactor knows the server's own env and header values, the host's
// credentials in scrub and, for a stdio server that inherits the
// environment, every variable of the daemon's own environment whose name
// says it is a credential (GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, …).
func newRedactor(cfg ServerConfig, scrub []secret.Secret) *redactor {
	r := &redactor{}
	var vals []string
	add := func(key, v string, warn bool) {
		if len(v) >= MinRedactLen {
			vals = append(vals, v)
		} else if v != "" && warn {
			r.tooShort = append(r.tooShort, key)
		}
		// A bearer token is often configured as "Bearer <token>": the
		// token alone may be echoed too.
		if _, tok, ok := strings.Cut(v, " "); ok && len(tok) >= MinRedactLen {
			vals = append(vals, tok)
		}
	}
	for _, k := range sortedKeys(cfg.Env) {
		add("env."+k, cfg.Env[k].Reveal(), true)
	}
	for _, k := range sortedKeys(cfg.Headers) {
		add("headers."+k, cfg.Headers[k].Reveal(), true)
	}
	for i, v := range scrub {
		add("scrub["+strconv.Itoa(i)+"]", v.Reveal(), true)
	}
	if cfg.Transport() == "stdio" && cfg.inheritEnv() {
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok && credentialName(k) {
				add("", v, false) // not configured here: nothing to warn about
			}
		}
	}
	// Go's HTTP errors quote the whole URL: its query and userinfo often
	// carry credentials too.
	if u, err := url.Parse(cfg.URL); err == nil && cfg.URL != "" {
		if len(u.RawQuery) >= 3 {
			vals = append(vals, u.RawQuery)
		}
		if p, ok := u.User.Password(); ok && len(p) >= 3 {
			vals = append(vals, p)
		}
		// A token is often the whole userinfo (https://TOKEN@host), and Go's
		// HTTP errors keep the user name (they mask only a password).
		if name := u.User.Username(); len(name) >= MinRedactLen {
			vals = append(vals, name)
		}
		// Or a path segment (/mcp/<key>/sse).
		for _, seg := range strings.Split(u.EscapedPath(), "/") {
			if credentialLike(seg) {
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
	vals = slices.Compact(vals) // the same key may be configured twice
	r.values = make([]redactValue, len(vals))
	for i, v := range vals {
		r.values[i] = redactValue{s: v, b: []byte(v), word: len(v) < wordOnlyBelow}
	}
	return r
}

func sortedKeys(m map[string]secret.Secret) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

const redactedMark = "[redacted]"

func (r *redactor) string(s string) string {
	for _, v := range r.values {
		if !strings.Contains(s, v.s) {
			continue
		}
		if v.word {
			s = replaceWord(s, v.s)
		} else {
			s = strings.ReplaceAll(s, v.s, redactedMark)
		}
	}
	return s
}

// bytes redacts a JSON document (a structured tool result). The common
// case, no secret in it, costs a search per value and no allocation.
func (r *redactor) bytes(b []byte) []byte {
	for _, v := range r.values {
		if bytes.Contains(b, v.b) {
			return []byte(r.string(string(b)))
		}
	}
	return b
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
			if b.Len() == 0 {
				b.Grow(len(s))
			}
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
