package cfgerr

import (
	"errors"
	"fmt"
	"testing"
)

// At re-keys every problem in a joined error under the prefix, keeps a
// plain error's text as its message, and all of them match ErrInvalid.
func TestAt(t *testing.T) {
	err := At("webhooks[2]", errors.Join(Errorf("timeout", "must not be negative"), Errorf("", "name is required"),
		errors.New("plain: text"), At("jetstream", Errorf("[1]", "x"))))
	var got []string
	for _, e := range Split(err) {
		got = append(got, e.Key+"|"+e.Msg)
	}
	want := []string{"webhooks[2].timeout|must not be negative", "webhooks[2]|name is required", "webhooks[2]|plain: text", "webhooks[2].jetstream[1]|x"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if !errors.Is(err, ErrInvalid) || At("x", nil) != nil || Split(nil) != nil {
		t.Fatalf("%v", err)
	}
	if s := At("a", Errorf("b", "c")).Error(); s != "a.b: c" {
		t.Fatalf("%q", s)
	}
}

func TestNotNegative(t *testing.T) {
	if err := NotNegative(N("a", 0), N("b", int64(3))); err != nil {
		t.Fatal(err)
	}
	err := NotNegative(N("a", 1), N("b", -1), N("c", -2))
	if s := err.Error(); s != "b: must not be negative" || !errors.Is(err, ErrInvalid) {
		t.Fatalf("%q", s)
	}
}
