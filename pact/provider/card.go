package provider

import (
	"encoding/json"
	"net/http"

	"github.com/pactledger/pactledger/pact/brand"
)

// card serves the Agent Card of PACT §2.1.
func (s *Server) card(w http.ResponseWriter, b *brand.Brand) {
	skills := b.Skills
	if skills == nil {
		skills = []brand.Skill{}
	}
	schemes := map[string]any{
		"paJwt": map[string]any{"httpAuthSecurityScheme": map[string]string{"scheme": "Bearer", "bearerFormat": "JWT"}},
	}
	requirements := []map[string]any{{"schemes": map[string]any{"paJwt": map[string]any{"list": []string{}}}}}
	if b.Delegation {
		// PACT §5.1: the device flow, and a second requirement naming both.
		// The brand's scopes in the order its file lists them.
		schemes["userDelegation"] = map[string]any{"oauth2SecurityScheme": map[string]any{
			"flows": map[string]any{"deviceCode": map[string]any{
				"deviceAuthorizationUrl": s.issuer(b) + "/device_authorization",
				"tokenUrl":               s.issuer(b) + "/token",
				"scopes":                 orderedScopes(b.Scopes),
			}},
			"oauth2MetadataUrl": s.metadataURL(b),
		}}
		requirements = append(requirements, map[string]any{"schemes": map[string]any{"paJwt": map[string]any{"list": []string{}}, "userDelegation": map[string]any{"list": []string{}}}})
	}
	card := map[string]any{
		"name":        b.Name,
		"description": b.Description,
		"supportedInterfaces": []map[string]string{{
			"url": s.InterfaceURL(b.ID), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0",
		}},
		"provider":             map[string]string{"organization": b.Organization, "url": s.cfg.BaseURL},
		"version":              b.Version,
		"capabilities":         map[string]bool{"streaming": false, "pushNotifications": false, "extendedAgentCard": false},
		"securitySchemes":      schemes,
		"securityRequirements": requirements,
		"defaultInputModes":    []string{"text/plain"},
		"defaultOutputModes":   []string{"text/plain"},
		"skills":               skills,
	}
	writeA2A(w, http.StatusOK, card)
}

// orderedScopes is the card's scope map (id to description), written in
// the brand's order: encoding/json would sort a Go map's keys.
type orderedScopes []brand.Scope

// MarshalJSON implements json.Marshaler.
func (o orderedScopes) MarshalJSON() ([]byte, error) {
	buf := []byte{'{'}
	for i, s := range o {
		if i > 0 {
			buf = append(buf, ',')
		}
		k, err := json.Marshal(s.ID)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(s.Description)
		if err != nil {
			return nil, err
		}
		buf = append(append(append(buf, k...), ':'), v...)
	}
	return append(buf, '}'), nil
}
