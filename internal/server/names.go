package server

import (
	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/pact"
)

// drillNames gathers the words a dispute reply uses instead of ids: the
// configured brands' and agents' display names, and for the Provider's
// brands their organization, scope descriptions and, for each tool, the
// description of the scope it needs (what the consent page showed the
// customer). The Provider's brands are those of the embedded Provider p,
// or, on a replica that runs none (p nil) but names the Provider's public
// URL (provider.baseUrl), the same brand files served at that URL.
func drillNames(cfg config.Config, p *pact.Provider) drill.Names {
	n := drill.Names{Brands: map[string]drill.BrandNames{}, Agents: agentNames(cfg)}
	for _, b := range cfg.Brands {
		if b.DisplayName != "" {
			n.Brands[b.InterfaceURL] = drill.BrandNames{Name: b.DisplayName}
		}
	}
	interfaceURL := func(id string) string { return pact.InterfaceURL(cfg.Provider.BaseURL, id) }
	switch {
	case p != nil:
		interfaceURL = p.InterfaceURL
	case cfg.Provider.On() || cfg.Provider.BaseURL == "":
		return n
	}
	brands, err := pact.LoadBrands(cfg.Provider.BrandsDir)
	if err != nil {
		return n // checked at start already: ledgerd would not run
	}
	for id, b := range brands {
		url := interfaceURL(id)
		bn := drill.BrandNames{Name: b.Organization, Scopes: map[string]string{}, Tools: map[string]string{}}
		if bn.Name == "" {
			bn.Name = b.Name
		}
		if cn, ok := n.Brands[url]; ok && cn.Name != "" {
			bn.Name = cn.Name // the configuration wins
		}
		for _, s := range b.Scopes {
			bn.Scopes[s.ID] = s.Description
		}
		for _, t := range b.Tools {
			if d := bn.Scopes[t.Scope]; d != "" {
				bn.Tools[t.Name] = d
			}
		}
		n.Brands[url] = bn
	}
	return n
}

// agentNames are the registered personal agents' displayNames, by issuer.
func agentNames(cfg config.Config) map[string]string {
	n := map[string]string{}
	for _, a := range cfg.Agents {
		if a.DisplayName != "" {
			n[a.Issuer] = a.DisplayName
		}
	}
	return n
}
