package a2a

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// AxocoatlCard is the discovery document at /.well-known/agent.json ([PathAxocoatlCard]), the
// shape Axocoatl peers read.
type AxocoatlCard struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     string `json:"version"`
	URL         string `json:"url"`
	// Endpoint is the absolute URL of POST /a2a/tasks.
	Endpoint string `json:"endpoint"`
	// Capabilities are the ids of the agents tasks may be addressed to.
	Capabilities []string        `json:"capabilities"`
	Agents       []AxocoatlAgent `json:"agents"`
}

// AxocoatlAgent is one agent on the Axocoatl card ([AxocoatlCard]).
type AxocoatlAgent struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// Node is the daemon of the cluster the agent runs on; omitted: this
	// one ([axocoatl.AgentInfo.Node]).
	Node string `json:"node,omitempty"`
}

// serveAxocoatlCard answers GET /.well-known/agent.json.
func (h *Handler) serveAxocoatlCard(w http.ResponseWriter, r *http.Request) {
	base := h.baseURL(r)
	card := AxocoatlCard{
		Name:         h.cfg.Name,
		Description:  h.cfg.Description,
		Version:      h.cfg.Version,
		URL:          base,
		Endpoint:     base + PathTasks,
		Capabilities: []string{},
		Agents:       []AxocoatlAgent{},
	}
	for _, a := range h.eng.AgentsFor(r.Context()) {
		card.Capabilities = append(card.Capabilities, a.ID)
		card.Agents = append(card.Agents, AxocoatlAgent{ID: a.ID, Name: a.Name, Description: a.Description, Node: a.Node})
	}
	writeCard(w, card)
}

// serveAgentCard serves the A2A card of the whole instance (one skill per
// agent), or with a non-empty agentID (the {id} of /a2a/agents/{id}/...) the
// card of that agent alone: 404 if there is none.
func (h *Handler) serveAgentCard(w http.ResponseWriter, r *http.Request, agentID string) {
	base := h.baseURL(r)
	if id := agentID; id != "" {
		info, err := h.eng.AgentFor(r.Context(), id)
		if err != nil {
			writeHTTPError(w, http.StatusNotFound, "agent_not_found", "no agent "+quote(id))
			return
		}
		card := h.card(base+PathAgentPrefix+id, []axocoatl.AgentInfo{info})
		card.Name = info.Name
		if info.Description != "" {
			card.Description = info.Description
		}
		h.writeDualCard(r.Context(), w, card)
		return
	}
	h.writeDualCard(r.Context(), w, h.card(base+PathJSONRPC, h.eng.AgentsFor(r.Context())))
}

// card builds the standard A2A 0.3 card whose JSON-RPC endpoint is url;
// writeDualCard adds what A2A 1.0 readers need.
func (h *Handler) card(url string, agents []axocoatl.AgentInfo) *a2a03.AgentCard {
	card := &a2a03.AgentCard{
		Name:               h.cfg.Name,
		Description:        h.cfg.Description,
		Version:            h.cfg.Version,
		ProtocolVersion:    ProtocolVersion,
		URL:                url,
		PreferredTransport: a2a03.TransportProtocolJSONRPC,
		AdditionalInterfaces: []a2a03.AgentInterface{
			{Transport: a2a03.TransportProtocolJSONRPC, URL: url},
		},
		Capabilities:       a2a03.AgentCapabilities{Streaming: true, PushNotifications: h.pushing()},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain"},
		Skills:             make([]a2a03.AgentSkill, 0, len(agents)),
	}
	for _, a := range agents {
		desc := a.Description
		if desc == "" {
			desc = "Agent " + a.Name + "."
		}
		card.Skills = append(card.Skills, a2a03.AgentSkill{
			ID:          a.ID,
			Name:        a.Name,
			Description: desc,
			Tags:        skillTags(a),
		})
	}
	return card
}

// v1CardFields are the members an A2A 1.0 reader needs beside the 0.3 card:
// supportedInterfaces (JSON-RPC and HTTP+JSON at the same URL, version 1.0;
// @a2a-js/sdk picks its transport from them and refuses a card without),
// and, with a token, the security schemes in a shape both generations read.
type v1CardFields struct {
	SupportedInterfaces  []*a2a1.AgentInterface           `json:"supportedInterfaces"`
	SecuritySchemes      map[string]map[string]any        `json:"securitySchemes,omitempty"`
	Security             []map[string][]string            `json:"security,omitempty"`
	SecurityRequirements a2a1.SecurityRequirementsOptions `json:"securityRequirements,omitempty"`
}

// writeDualCard writes card (0.3, whose Security fields are empty) with the
// 1.0 members added. Each security scheme carries the 0.3 members (type,
// scheme, in, name: a2a-go v0.3 and @a2a-js/sdk read these) and the 1.0
// oneof member (httpAuthSecurityScheme, apiKeySecurityScheme: a2a-go/v2
// reads these); every reader ignores the other generation's keys.
func (h *Handler) writeDualCard(ctx context.Context, w http.ResponseWriter, card *a2a03.AgentCard) {
	extra := v1CardFields{SupportedInterfaces: []*a2a1.AgentInterface{
		{URL: card.URL, ProtocolBinding: a2a1.TransportProtocolJSONRPC, ProtocolVersion: ProtocolVersion1},
		{URL: card.URL, ProtocolBinding: a2a1.TransportProtocolHTTPJSON, ProtocolVersion: ProtocolVersion1},
	}}
	if h.eng.AuthRequired() {
		const bearerDesc, keyDesc = "Authorization: Bearer <api_token>", "the api_token"
		extra.SecuritySchemes = map[string]map[string]any{
			"bearer": {"type": "http", "scheme": "bearer", "description": bearerDesc,
				"httpAuthSecurityScheme": map[string]any{"scheme": "bearer", "description": bearerDesc}},
			"apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key", "description": keyDesc,
				"apiKeySecurityScheme": map[string]any{"location": "header", "name": "X-API-Key", "description": keyDesc}},
		}
		extra.Security = []map[string][]string{{"bearer": {}}, {"apiKey": {}}}
		extra.SecurityRequirements = a2a1.SecurityRequirementsOptions{{"bearer": {}}, {"apiKey": {}}}
		if o := h.eng.HTTP().OAuth; o != nil {
			// JWT access tokens of the configured issuer: its RFC 8414
			// metadata names the endpoints; a 1.0 card names one flow.
			iss := strings.TrimRight(o.Issuer, "/")
			meta := iss + "/.well-known/oauth-authorization-server"
			if u, err := url.Parse(iss); err == nil && u.Path != "" {
				meta = u.Scheme + "://" + u.Host + "/.well-known/oauth-authorization-server" + u.Path
			}
			scopes := map[string]string{"read": "list and read", "execute": "run agents", "approve": "give verdicts", "admin": "everything"}
			authURL, tokenURL := h.eng.OAuthEndpoints(ctx)
			flows := map[string]any{}
			var flow1 map[string]any
			if tokenURL != "" {
				flows["clientCredentials"] = map[string]any{"tokenUrl": tokenURL, "scopes": scopes}
				flow1 = map[string]any{"clientCredentials": flows["clientCredentials"]}
				if authURL != "" {
					flows["authorizationCode"] = map[string]any{"authorizationUrl": authURL, "tokenUrl": tokenURL, "scopes": scopes}
					flow1 = map[string]any{"authorizationCode": flows["authorizationCode"]}
				}
			}
			const oauthDesc = "OAuth 2.0 access tokens (JWT) of the issuer; scopes read, execute, approve, admin"
			// a2a-go/v2 refuses a scheme without a flow: with the issuer's
			// metadata out of reach the card names the bearer schemes only.
			if flow1 != nil {
				extra.SecuritySchemes["oauth2"] = map[string]any{"type": "oauth2", "description": oauthDesc, "oauth2MetadataUrl": meta, "flows": flows,
					"oauth2SecurityScheme": map[string]any{"description": oauthDesc, "oauth2MetadataUrl": meta, "flows": flow1}}
				extra.Security = append(extra.Security, map[string][]string{"oauth2": {}})
				extra.SecurityRequirements = append(extra.SecurityRequirements, a2a1.SecurityRequirements{"oauth2": {}})
			}
		}
	}
	b03, err := json.Marshal(card)
	if err == nil {
		var b10 []byte
		b10, err = json.Marshal(extra)
		if err == nil {
			b03 = append(append(b03[:len(b03)-1], ','), b10[1:]...)
		}
	}
	if err != nil {
		writeHTTPError(w, http.StatusInternalServerError, "internal", "encoding the card failed")
		return
	}
	writeCard(w, json.RawMessage(b03))
}

func writeCard(w http.ResponseWriter, card any) {
	b, err := json.Marshal(card)
	if err != nil {
		writeHTTPError(w, http.StatusInternalServerError, "internal", "encoding the card failed")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	_, _ = w.Write(append(b, '\n'))
}

// writeHTTPError writes the daemon's error shape {"error":{"code","message"}}.
func writeHTTPError(w http.ResponseWriter, status int, code, message string) {
	b, _ := json.Marshal(map[string]map[string]string{"error": {"code": code, "message": message}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
