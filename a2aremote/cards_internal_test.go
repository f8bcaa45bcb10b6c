package a2aremote

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A card is the remote's word, read by the module's own goroutine (no
// tool call's recover around it): a null where an interface, a skill or a
// security scheme goes must be a precise error or skipped, never a nil
// dereference, which ended the process ("supportedInterfaces":[null]).
func TestHostileCardNulls(t *testing.T) {
	for body, want := range map[string]string{
		`{"name":"n","supportedInterfaces":[null]}`: "agent card names a null interface",
		`{"name":"n","supportedInterfaces":[{"url":"http://h/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"},null]}`:        "agent card names a null interface",
		`{"name":"n","url":"http://h/a2a","preferredTransport":"JSONRPC","additionalInterfaces":[null]}`:                              `interface URL "" is not an absolute http or https URL`,
		`{"name":"n","url":"http://h/a2a","skills":[null,{"id":"s","name":"s","security":[null]}],"security":[null],"provider":null}`: "",
	} {
		srv := httptest.NewServer(&answer03{status: http.StatusOK, contentType: "application/json", body: body})
		card, err := fetchCard(context.Background(), srv.Client(), srv.URL)
		srv.Close()
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", body, err)
		case want == "":
			_ = Generation(card)
			_ = describeCard(card)
		case err == nil || !strings.Contains(err.Error(), want):
			t.Errorf("%s: %v, want an error with %q", body, err, want)
		}
	}
}
