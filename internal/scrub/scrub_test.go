package scrub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// Short values (under WordOnlyBelow) are replaced only as words; long
// ones everywhere.
func TestStringWordRule(t *testing.T) {
	sc := New("prod", "sk-long-secret-value")
	for in, want := range map[string]string{
		"env=prod":                    "env=[redacted]",
		"production prod.":            "production [redacted].",
		"reproduce":                   "reproduce",
		`{"k":"prod","v":"prodprod"}`: `{"k":"[redacted]","v":"prodprod"}`,
		"xsk-long-secret-valuex":      "x[redacted]x",
		"prod":                        "[redacted]",
		"prod prod":                   "[redacted] [redacted]",
		"éprod prodé prod_x":          "éprod prodé [redacted]_x", // letters of any script join a word; "_" does not
		"\xffprod\xff":                "\xff[redacted]\xff",       // an invalid byte bounds a word
		"prod7 7prod":                 "prod7 7prod",
		"":                            "",
	} {
		if got := sc.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

// A value containing another is replaced whole, whatever the order given.
func TestStringLongestFirst(t *testing.T) {
	for _, vals := range [][]string{{"abcdefgh", "abcdefgh-ijkl"}, {"abcdefgh-ijkl", "abcdefgh", "abcdefgh"}} {
		sc := New(vals...)
		if got := sc.String("k=abcdefgh-ijkl;j=abcdefgh"); got != "k=[redacted];j=[redacted]" {
			t.Errorf("New(%q).String = %q", vals, got)
		}
	}
}

// Secret keeps values of MinLen or more and the token after a space, and
// names the configured values too short to scrub.
func TestValuesSecret(t *testing.T) {
	var v Values
	v.Secret("headers.Authorization", "Bearer tok-123456789")
	v.Secret("env.DEBUG", "1")
	v.Secret("", "no") // not configured by the user: not reported
	v.Secret("env.EMPTY", "")
	v.Secret("scrub[0]", "abcd")
	if got, want := v.TooShort(), []string{"env.DEBUG"}; !slices.Equal(got, want) {
		t.Errorf("TooShort = %q, want %q", got, want)
	}
	sc := v.Scrubber()
	for in, want := range map[string]string{
		"you sent: Bearer tok-123456789": "you sent: [redacted]",
		"token tok-123456789":            "token [redacted]",
		"debug=1 no abcd abcde":          "debug=1 no [redacted] abcde",
	} {
		if got := sc.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

// URL adds the query, the password, a user name of MinLen or more and the
// key-like path segments; the route's own words stay.
func TestValuesURL(t *testing.T) {
	const key = "sk-ak-9f8e7d6c5b4a3f2e1d0c"
	var v Values
	v.URL("https://ghp_user:pw1@mcp.example.com/mcp/" + key + "/sse?k=abc")
	v.URL("https://abc@h/x") // a user name under MinLen is not scrubbed
	v.URL("")
	v.URL("%zz")
	sc := v.Scrubber()
	in := `Get "https://ghp_user:pw1@mcp.example.com/mcp/` + key + `/sse?k=abc": refused; abc mcp sse`
	want := `Get "https://[redacted]:[redacted]@mcp.example.com/mcp/[redacted]/sse?[redacted]": refused; abc mcp sse`
	if got := sc.String(in); got != want {
		t.Errorf("String = %q\nwant %q", got, want)
	}
}

// Bytes hands back the same document, unallocated, when it holds no
// secret, and a scrubbed copy when it does.
func TestBytes(t *testing.T) {
	sc := New("sk-0123456789abcdef", "eu-1")
	clean := []byte(`{"sum":5,"note":"the sum of 2 and 3"}`)
	if got := sc.Bytes(clean); &got[0] != &clean[0] {
		t.Error("Bytes copied a document without secrets")
	}
	if n := testing.AllocsPerRun(100, func() { sc.Bytes(clean); sc.String("the sum of 2 and 3") }); n != 0 {
		t.Errorf("%v allocations scrubbing text without secrets", n)
	}
	if got := string(sc.Bytes([]byte(`{"k":"sk-0123456789abcdef","r":"eu-1"}`))); got != `{"k":"[redacted]","r":"[redacted]"}` {
		t.Errorf("Bytes = %s", got)
	}
}

var errMine = errors.New("mine")

// A scrubbed error answers errors.Is for its whole chain but hands out
// neither the original (Unwrap) nor its typed parts (errors.As), whose
// text holds the secret.
func TestError(t *testing.T) {
	const secretURL = "https://tok-aaaaaaaaaaaa@h/x"
	sc := New("tok-aaaaaaaaaaaa")
	orig := fmt.Errorf("call: %w: %w", errMine, &url.Error{Op: "Get", URL: secretURL, Err: fmt.Errorf("dial: %w", context.Canceled)})
	err := sc.Error(orig)
	if strings.Contains(err.Error(), "tok-aaaaaaaaaaaa") || !strings.Contains(err.Error(), "https://[redacted]@h/x") {
		t.Errorf("Error() = %q", err)
	}
	for _, target := range []error{errMine, context.Canceled} {
		if !errors.Is(err, target) || !errors.Is(fmt.Errorf("wrapped: %w", err), target) {
			t.Errorf("errors.Is(%v) = false", target)
		}
	}
	if errors.Is(err, io.EOF) {
		t.Error("errors.Is(io.EOF) = true")
	}
	if errors.Unwrap(err) != nil {
		t.Error("the scrubbed error unwraps to the original")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		t.Errorf("errors.As handed out the original's *url.Error: %s", ue.URL)
	}

	clean := fmt.Errorf("no secret: %w", io.EOF)
	if sc.Error(clean) != clean {
		t.Error("an error without secret was replaced")
	}
	if sc.Error(nil) != nil {
		t.Error("Error(nil) != nil")
	}
}

// Every part of a record passed through Logger is scrubbed: the message,
// string attributes, errors, groups and the attributes given to With.
func TestLogger(t *testing.T) {
	const tok = "tok-bbbbbbbbbbbb"
	sc := New(tok)
	var buf bytes.Buffer
	log := sc.Logger(slog.New(slog.NewTextHandler(&buf, nil)))
	log.With("base", "u="+tok).WithGroup("g").Info("failed with "+tok,
		"s", tok, "err", errors.New("e "+tok), slog.Group("sub", "v", tok), "n", 3)
	out := buf.String()
	if strings.Contains(out, tok) {
		t.Errorf("the token reached the log: %s", out)
	}
	if got := strings.Count(out, Mark); got != 5 {
		t.Errorf("%d marks, want 5: %s", got, out)
	}
	if !strings.Contains(out, "g.n=3") {
		t.Errorf("other attributes lost: %s", out)
	}

	plain := slog.New(slog.NewTextHandler(&buf, nil))
	if New().Logger(plain) != plain {
		t.Error("an empty Scrubber wrapped the logger")
	}
}

// A nil Scrubber scrubs nothing and does not panic.
func TestNil(t *testing.T) {
	var sc *Scrubber
	err := errors.New("x")
	if sc.String("a") != "a" || string(sc.Bytes([]byte("b"))) != "b" || sc.Error(err) != err || !sc.Empty() {
		t.Error("nil Scrubber changed something")
	}
}
