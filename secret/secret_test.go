package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestSecretNeverPrints(t *testing.T) {
	s := Secret("sk-live-123")
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "key", s, "struct", struct{ K Secret }{s})
	js, _ := json.Marshal(map[string]Secret{"k": s})
	out := strings.Join([]string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, struct{ K Secret }{s}, s, s), buf.String(), string(js)}, "\n")
	if strings.Contains(out, "sk-live") {
		t.Fatalf("secret leaked:\n%s", out)
	}
	if !strings.Contains(out, "[redacted]") {
		t.Fatalf("expected [redacted] marker:\n%s", out)
	}
	if s.Reveal() != "sk-live-123" {
		t.Fatal("Reveal lost the value")
	}
}
