package a2awire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// ParseCard gives the card a2av0's parser gives, for 0.3 cards as the 0.3
// SDK writes them (additionalInterfaces incl. HTTP+JSON and gRPC, every
// kind of security scheme, security on the card and on skills, the
// extended card flag), for hand-written 0.3 cards and for a 1.0 card; and
// the error a2av0's gives for what is not a card.
func TestParseCardMatchesA2AV0(t *testing.T) {
	full, err := json.Marshal(&a2a03.AgentCard{
		Name: "Planner", Description: "Plans trips.", Version: "2.1", ProtocolVersion: "0.3.0",
		URL: "https://a.example/a2a", PreferredTransport: a2a03.TransportProtocolJSONRPC,
		AdditionalInterfaces: []a2a03.AgentInterface{
			{Transport: a2a03.TransportProtocolJSONRPC, URL: "https://a.example/a2a"},
			{Transport: a2a03.TransportProtocolHTTPJSON, URL: "https://a.example/rest"},
			{Transport: a2a03.TransportProtocolGRPC, URL: "https://a.example:9090"},
		},
		Capabilities: a2a03.AgentCapabilities{Streaming: true, PushNotifications: true,
			Extensions: []a2a03.AgentExtension{{URI: "https://ext.example/x", Required: true, Params: map[string]any{"k": "v"}}}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain", "application/json"},
		DocumentationURL: "https://a.example/doc", IconURL: "https://a.example/icon.png",
		Provider:                          &a2a03.AgentProvider{Org: "Example", URL: "https://example.org"},
		SupportsAuthenticatedExtendedCard: true,
		SecuritySchemes: a2a03.NamedSecuritySchemes{
			"key":    a2a03.APIKeySecurityScheme{In: a2a03.APIKeySecuritySchemeInHeader, Name: "X-Key", Description: "a key"},
			"bearer": a2a03.HTTPAuthSecurityScheme{Scheme: "Bearer", BearerFormat: "JWT"},
			"oidc":   a2a03.OpenIDConnectSecurityScheme{OpenIDConnectURL: "https://id.example/.well-known/openid-configuration"},
			"mtls":   a2a03.MutualTLSSecurityScheme{Description: "client certs"},
			"oauth": a2a03.OAuth2SecurityScheme{Flows: a2a03.OAuthFlows{AuthorizationCode: &a2a03.AuthorizationCodeOAuthFlow{
				AuthorizationURL: "https://id.example/auth", TokenURL: "https://id.example/token", Scopes: map[string]string{"plan": "make plans"}}}},
		},
		Security: []a2a03.SecurityRequirements{{"bearer": {}}, {"oauth": {"plan"}}},
		Skills: []a2a03.AgentSkill{
			{ID: "plan", Name: "plan", Description: "makes a plan", Tags: []string{"plan"}, Examples: []string{"a trip"},
				InputModes: []string{"text/plain"}, Security: []a2a03.SecurityRequirements{{"key": {}}}},
			{ID: "book", Name: "book", Description: "books it", Tags: []string{"book"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	v1, err := json.Marshal(&a2a1.AgentCard{
		Name: "Planner", Description: "1.0", Version: "1",
		SupportedInterfaces: []*a2a1.AgentInterface{
			a2a1.NewAgentInterface("https://b.example/a2a", a2a1.TransportProtocolJSONRPC),
			a2a1.NewAgentInterface("https://b.example/rest", a2a1.TransportProtocolHTTPJSON),
		},
		Capabilities: a2a1.AgentCapabilities{Streaming: true},
		Skills:       []a2a1.AgentSkill{{ID: "s", Name: "s", Description: "d", Tags: []string{"t"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cards := []struct {
		name, body string
		ifaces     int // interfaces the card names, a check that the parse read them
	}{
		{"0.3 full", string(full), 3},
		{"0.3 http+json preferred", `{"name":"n","description":"d","version":"1","protocolVersion":"0.3.0","url":"http://h/rest","preferredTransport":"HTTP+JSON","additionalInterfaces":[{"transport":"JSONRPC","url":"http://h/rpc"}],"capabilities":{"streaming":false},"skills":[]}`, 2},
		{"0.3 no protocolVersion", `{"name":"n","url":"http://h/rpc","preferredTransport":"JSONRPC"}`, 1},
		{"0.3 security scheme in 1.0 shape", `{"name":"n","url":"http://h/rpc","preferredTransport":"JSONRPC","securitySchemes":{"k":{"apiKeySecurityScheme":{"location":"header","name":"K"}}}}`, 1},
		{"1.0", string(v1), 2},
		{"no interface", `{"name":"x","description":"y","version":"1"}`, 0},
	}
	for _, c := range cards {
		t.Run(c.name, func(t *testing.T) {
			ours, err := ParseCard([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := a2av0.NewAgentCardParser()([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ours, theirs) {
				o, _ := json.Marshal(ours)
				th, _ := json.Marshal(theirs)
				t.Fatalf("ParseCard = %s\na2av0     = %s", o, th)
			}
			if len(ours.SupportedInterfaces) != c.ifaces {
				t.Fatalf("interfaces = %+v, want %d", ours.SupportedInterfaces, c.ifaces)
			}
		})
	}
	// Where ParseCard differs from a2av0 on purpose: a 0.3 card's
	// preferredTransport "defaults to 'JSONRPC'" when absent (the 0.3
	// spec, a2a-go v0.3's AgentCard.PreferredTransport); a2av0 drops the
	// url's interface, which left a card of only a url (as 0.2-era agents
	// write them) with no interface at all, so the agent could not be called.
	for body, want := range map[string]string{
		`{"name":"n","url":"http://h/rpc"}`: "JSONRPC http://h/rpc 0.3",
		`{"name":"n","url":"http://h/rpc","protocolVersion":"0.2.5","additionalInterfaces":[{"transport":"HTTP+JSON","url":"http://h/rest"}]}`: "JSONRPC http://h/rpc 0.2.5, HTTP+JSON http://h/rest 0.2.5",
		`{"name":"n","url":"http://h/rpc","additionalInterfaces":[{"transport":"JSONRPC","url":"http://h/rpc"}]}`:                              "JSONRPC http://h/rpc 0.3",
	} {
		card, err := ParseCard([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, i := range card.SupportedInterfaces {
			got = append(got, fmt.Sprintf("%s %s %s", i.ProtocolBinding, i.URL, i.ProtocolVersion))
		}
		if strings.Join(got, ", ") != want {
			t.Errorf("%s: interfaces %q, want %q", body, got, want)
		}
	}
	// The full card: what the module reads of it.
	card, _ := ParseCard(full)
	if card.Name != "Planner" || !card.Capabilities.Streaming || !card.Capabilities.ExtendedAgentCard || len(card.Skills) != 2 ||
		card.SupportedInterfaces[1].ProtocolBinding != a2a1.TransportProtocolHTTPJSON || card.SupportedInterfaces[1].ProtocolVersion != "0.3.0" ||
		len(card.SecuritySchemes) != 5 || len(card.Skills[0].SecurityRequirements) != 1 {
		t.Fatalf("full card read as %+v", card)
	}
	for _, bad := range []string{`hello`, `{"name":1}`, `{"securitySchemes":{"x":{"type":"magic"}}}`, `{"securitySchemes":{"o":{"type":"oauth2","flows":{}}}}`} {
		_, ours := ParseCard([]byte(bad))
		_, theirs := a2av0.NewAgentCardParser()([]byte(bad))
		if ours == nil || theirs == nil || ours.Error() != theirs.Error() {
			t.Errorf("%s: ParseCard error %v, a2av0's %v", bad, ours, theirs)
		}
	}
}
