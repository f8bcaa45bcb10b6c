// This file reads an A2A 0.3 agent card into the A2A 1.0 a2a1.AgentCard.
// It is a port of a2a-go/v2 v2.4.0's a2acompat/a2av0/agentcard.go (the
// parsing half; Copyright 2026 The A2A Authors, Apache License 2.0): the
// package a2av0 would bring the 0.3 SDK's servers and with them gRPC and
// protobuf into every binary that uses this module. TestParseCardMatchesA2AV0
// holds the two parsers to the same output, except for a 0.3 url without
// preferredTransport (JSON-RPC's here, dropped by a2av0).

package a2awire

import (
	"encoding/json"
	"fmt"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
)

// ParseCard reads an agent card of A2A 1.0 (supportedInterfaces) or 0.3
// (url, preferredTransport, additionalInterfaces, protocol version 0.3),
// as a2av0.NewAgentCardParser does, except that a 0.3 url without
// preferredTransport is JSON-RPC's, as the 0.3 spec says.
func ParseCard(b []byte) (*a2a1.AgentCard, error) {
	var compatCard agentCardCompat
	if err := json.Unmarshal(b, &compatCard); err != nil {
		return nil, err
	}

	if compatCard.SupportsAuthenticatedExtendedCard {
		compatCard.Capabilities.ExtendedAgentCard = true
	}

	return &a2a1.AgentCard{
		Capabilities:       compatCard.Capabilities,
		DefaultInputModes:  compatCard.DefaultInputModes,
		DefaultOutputModes: compatCard.DefaultOutputModes,
		Description:        compatCard.Description,
		DocumentationURL:   compatCard.DocumentationURL,
		IconURL:            compatCard.IconURL,
		Name:               compatCard.Name,
		Provider:           compatCard.Provider,
		Version:            compatCard.Version,
		Signatures:         compatCard.Signatures,

		SecurityRequirements: mapFromCompatSecurity(compatCard),
		SupportedInterfaces:  mapFromCompatInterfaces(compatCard),
		SecuritySchemes:      mapFromCompatSecuritySchemes(compatCard.SecuritySchemes),
		Skills:               mapFromCompatSkills(compatCard.Skills),
	}, nil
}

func mapFromCompatSecuritySchemes(schemes namedSecuritySchemes) a2a1.NamedSecuritySchemes {
	result := a2a1.NamedSecuritySchemes{}
	for name, scheme := range schemes {
		switch v := scheme.(type) {
		case a2a1.APIKeySecurityScheme:
			result[name] = v
		case a2a1.HTTPAuthSecurityScheme:
			result[name] = v
		case a2a1.OpenIDConnectSecurityScheme:
			result[name] = v
		case a2a1.MutualTLSSecurityScheme:
			result[name] = v
		case a2a1.OAuth2SecurityScheme:
			result[name] = v
		case apiKeySecurityScheme:
			if v.ApiKey != nil {
				result[name] = *v.ApiKey
			} else {
				result[name] = a2a1.APIKeySecurityScheme{
					Description: v.Description,
					Location:    v.In,
					Name:        v.Name,
				}
			}
		case httpAuthSecurityScheme:
			if v.HTTPAuth != nil {
				result[name] = *v.HTTPAuth
			} else {
				result[name] = a2a1.HTTPAuthSecurityScheme{
					Description:  v.Description,
					BearerFormat: v.BearerFormat,
					Scheme:       v.Scheme,
				}
			}
		case openIDConnectSecurityScheme:
			if v.OpenID != nil {
				result[name] = *v.OpenID
			} else {
				result[name] = a2a1.OpenIDConnectSecurityScheme{
					Description:      v.Description,
					OpenIDConnectURL: v.OpenIDConnectURL,
				}
			}
		case mutualTLSSecurityScheme:
			if v.MutualTLS != nil {
				result[name] = *v.MutualTLS
			} else {
				result[name] = a2a1.MutualTLSSecurityScheme{Description: v.Description}
			}
		case oauth2SecurityScheme:
			if v.OAuth2 != nil {
				result[name] = *v.OAuth2
			} else {
				result[name] = a2a1.OAuth2SecurityScheme{
					Description:       v.Description,
					Flows:             v.Flows,
					Oauth2MetadataURL: v.Oauth2MetadataURL,
				}
			}
		}
	}
	return result
}

func mapFromCompatSecurity(card agentCardCompat) a2a1.SecurityRequirementsOptions {
	if len(card.SecurityRequirements) > 0 {
		return card.SecurityRequirements
	}
	var out a2a1.SecurityRequirementsOptions
	for _, r := range card.Security {
		out = append(out, a2a1.SecurityRequirements(r))
	}
	return out
}

func mapFromCompatInterfaces(card agentCardCompat) []*a2a1.AgentInterface {
	if len(card.SupportedInterfaces) > 0 {
		return card.SupportedInterfaces
	}
	version := Version03
	if len(card.ProtocolVersion) > 0 {
		version = card.ProtocolVersion
	}
	out := make([]*a2a1.AgentInterface, 0, 1+len(card.AdditionalInterfaces))
	if len(card.URL) > 0 {
		// preferredTransport "defaults to 'JSONRPC'" (0.3); a2av0 drops
		// the url without it, leaving a card of only a url uncallable.
		binding := card.PreferredTransport
		if binding == "" {
			binding = a2a1.TransportProtocolJSONRPC
		}
		out = append(out, &a2a1.AgentInterface{URL: card.URL, ProtocolBinding: binding, ProtocolVersion: version})
	}
	for _, r := range card.AdditionalInterfaces {
		if r.URL == card.URL {
			continue
		}
		out = append(out, &a2a1.AgentInterface{URL: r.URL, ProtocolBinding: r.Transport, ProtocolVersion: version})
	}
	return out
}

func mapFromCompatSkills(skills []agentSkill) []a2a1.AgentSkill {
	result := make([]a2a1.AgentSkill, len(skills))
	for i, s := range skills {
		skill := s.AgentSkill
		if len(skill.SecurityRequirements) == 0 {
			for _, r := range s.Security {
				skill.SecurityRequirements = append(skill.SecurityRequirements, a2a1.SecurityRequirements(r))
			}
		}
		result[i] = skill
	}
	return result
}

type agentCardCompat struct {
	// The same as v1.0
	DefaultInputModes  []string                  `json:"defaultInputModes"`
	DefaultOutputModes []string                  `json:"defaultOutputModes"`
	Description        string                    `json:"description"`
	DocumentationURL   string                    `json:"documentationUrl,omitempty"`
	IconURL            string                    `json:"iconUrl,omitempty"`
	Name               string                    `json:"name"`
	Provider           *a2a1.AgentProvider       `json:"provider,omitempty"`
	Signatures         []a2a1.AgentCardSignature `json:"signatures,omitempty"`
	Version            string                    `json:"version"`

	// Nested changes
	Skills          []agentSkill         `json:"skills"`
	SecuritySchemes namedSecuritySchemes `json:"securitySchemes,omitempty"`

	// Moved from root into capabilities
	Capabilities                      a2a1.AgentCapabilities `json:"capabilities"`
	SupportsAuthenticatedExtendedCard bool                   `json:"supportsAuthenticatedExtendedCard,omitempty"`

	// Added in v1.0
	SupportedInterfaces  []*a2a1.AgentInterface           `json:"supportedInterfaces"`
	SecurityRequirements a2a1.SecurityRequirementsOptions `json:"securityRequirements,omitempty"`

	// Removed in v1.0
	AdditionalInterfaces []agentInterface       `json:"additionalInterfaces,omitempty"`
	URL                  string                 `json:"url"`
	ProtocolVersion      a2a1.ProtocolVersion   `json:"protocolVersion"`
	PreferredTransport   a2a1.TransportProtocol `json:"preferredTransport,omitempty"`
	Security             []securityRequirements `json:"security,omitempty"`
}

type securityRequirements map[a2a1.SecuritySchemeName]a2a1.SecuritySchemeScopes

type agentInterface struct {
	Transport a2a1.TransportProtocol `json:"transport"`
	URL       string                 `json:"url"`
}

type agentSkill struct {
	a2a1.AgentSkill
	Security []securityRequirements `json:"security,omitempty"`
}

type namedSecuritySchemes map[a2a1.SecuritySchemeName]any

func (s *namedSecuritySchemes) UnmarshalJSON(b []byte) error {
	var schemes map[a2a1.SecuritySchemeName]json.RawMessage
	if err := json.Unmarshal(b, &schemes); err != nil {
		return err
	}

	result := make(map[a2a1.SecuritySchemeName]any, len(schemes))

	for name, rawMessage := range schemes {
		type schemeType struct {
			Type          string                            `json:"type"`
			ApiKey        *a2a1.APIKeySecurityScheme        `json:"apiKeySecurityScheme,omitempty"`
			HTTP          *a2a1.HTTPAuthSecurityScheme      `json:"httpAuthSecurityScheme,omitempty"`
			MutualTLS     *a2a1.MutualTLSSecurityScheme     `json:"mtlsSecurityScheme,omitempty"`
			OAuth2        *a2a1.OAuth2SecurityScheme        `json:"oauth2SecurityScheme,omitempty"`
			OpenIDConnect *a2a1.OpenIDConnectSecurityScheme `json:"openIdConnectSecurityScheme,omitempty"`
		}
		var st schemeType
		if err := json.Unmarshal(rawMessage, &st); err != nil {
			return err
		}

		// Compat or old
		if st.Type != "" {
			switch st.Type {
			case "apiKey":
				var scheme apiKeySecurityScheme
				if err := json.Unmarshal(rawMessage, &scheme); err != nil {
					return err
				}
				result[name] = scheme
			case "http":
				var scheme httpAuthSecurityScheme
				if err := json.Unmarshal(rawMessage, &scheme); err != nil {
					return err
				}
				result[name] = scheme
			case "mutualTLS":
				var scheme mutualTLSSecurityScheme
				if err := json.Unmarshal(rawMessage, &scheme); err != nil {
					return err
				}
				result[name] = scheme
			case "oauth2":
				var scheme oauth2SecurityScheme
				if err := json.Unmarshal(rawMessage, &scheme); err != nil {
					return err
				}
				result[name] = scheme
			case "openIdConnect":
				var scheme openIDConnectSecurityScheme
				if err := json.Unmarshal(rawMessage, &scheme); err != nil {
					return err
				}
				result[name] = scheme
			default:
				return fmt.Errorf("unknown security scheme type %q", st.Type)
			}
			continue
		}

		// New format
		if st.ApiKey != nil {
			result[name] = *st.ApiKey
		} else if st.HTTP != nil {
			result[name] = *st.HTTP
		} else if st.MutualTLS != nil {
			result[name] = *st.MutualTLS
		} else if st.OAuth2 != nil {
			result[name] = *st.OAuth2
		} else if st.OpenIDConnect != nil {
			result[name] = *st.OpenIDConnect
		} else {
			return fmt.Errorf("unknown security scheme: %q, parse result: %+v", string(rawMessage), st)
		}
	}
	*s = namedSecuritySchemes(result)
	return nil
}

type apiKeySecurityScheme struct {
	Type        string                            `json:"type"`
	Description string                            `json:"description,omitempty"`
	In          a2a1.APIKeySecuritySchemeLocation `json:"in"`
	Name        string                            `json:"name"`
	ApiKey      *a2a1.APIKeySecurityScheme        `json:"apiKey"`
}

type httpAuthSecurityScheme struct {
	Type         string                       `json:"type"`
	BearerFormat string                       `json:"bearerFormat,omitempty"`
	Description  string                       `json:"description,omitempty"`
	Scheme       string                       `json:"scheme"`
	HTTPAuth     *a2a1.HTTPAuthSecurityScheme `json:"http"`
}

type mutualTLSSecurityScheme struct {
	Type        string                        `json:"type"`
	Description string                        `json:"description,omitempty"`
	MutualTLS   *a2a1.MutualTLSSecurityScheme `json:"mutualTLS"`
}

type openIDConnectSecurityScheme struct {
	Type             string                            `json:"type"`
	Description      string                            `json:"description,omitempty"`
	OpenIDConnectURL string                            `json:"openIdConnectUrl"`
	OpenID           *a2a1.OpenIDConnectSecurityScheme `json:"openIdConnect"`
}

type oauth2SecurityScheme struct {
	Type              string                     `json:"type"`
	Description       string                     `json:"description,omitempty"`
	Flows             a2a1.OAuthFlows            `json:"flows"`
	Oauth2MetadataURL string                     `json:"oauth2MetadataUrl,omitempty"`
	OAuth2            *a2a1.OAuth2SecurityScheme `json:"oauth2"`
}

func (s *oauth2SecurityScheme) UnmarshalJSON(b []byte) error {
	type wrapper struct {
		Description       string                                 `json:"description,omitempty"`
		Oauth2MetadataURL string                                 `json:"oauth2MetadataUrl,omitempty"`
		Flows             map[a2a1.OAuthFlowName]json.RawMessage `json:"flows,omitempty"`
	}
	var scheme wrapper
	if err := json.Unmarshal(b, &scheme); err != nil {
		return err
	}

	if len(scheme.Flows) != 1 {
		return fmt.Errorf("expected exactly one OAuth flow, got %d", len(scheme.Flows))
	}

	s.Description = scheme.Description
	s.Oauth2MetadataURL = scheme.Oauth2MetadataURL

	for name, rawMessage := range scheme.Flows {
		switch name {
		case a2a1.AuthorizationCodeOAuthFlowName:
			var flow a2a1.AuthorizationCodeOAuthFlow
			if err := json.Unmarshal(rawMessage, &flow); err != nil {
				return err
			}
			s.Flows = flow
		case a2a1.ClientCredentialsOAuthFlowName:
			var flow a2a1.ClientCredentialsOAuthFlow
			if err := json.Unmarshal(rawMessage, &flow); err != nil {
				return err
			}
			s.Flows = flow
		case a2a1.ImplicitOAuthFlowName:
			var flow a2a1.ImplicitOAuthFlow
			if err := json.Unmarshal(rawMessage, &flow); err != nil {
				return err
			}
			s.Flows = flow
		case a2a1.PasswordOAuthFlowName:
			var flow a2a1.PasswordOAuthFlow
			if err := json.Unmarshal(rawMessage, &flow); err != nil {
				return err
			}
			s.Flows = flow
		case a2a1.DeviceCodeOAuthFlowName:
			var flow a2a1.DeviceCodeOAuthFlow
			if err := json.Unmarshal(rawMessage, &flow); err != nil {
				return err
			}
			s.Flows = flow
		default:
			keys := make([]string, 0, len(scheme.Flows))
			for k := range scheme.Flows {
				keys = append(keys, string(k))
			}
			return fmt.Errorf("unknown OAuth flow type: %s, available: %v", name, keys)
		}
	}
	return nil
}
