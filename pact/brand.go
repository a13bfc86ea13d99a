package pact

import (
	"embed"
	"io/fs"
	"sort"

	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/provider"
	"github.com/pactledger/pactledger/retention"
)

//go:embed brands/*.yaml
var builtinBrands embed.FS

// Brand is one brand's data (package brand): what its card says, the scopes
// it defines, its accounts, records, tools and intents.
type Brand = brand.Brand

// Skill, Scope, Account and Login are parts of a brand file.
type (
	Skill   = brand.Skill
	Scope   = brand.Scope
	Account = brand.Account
	Login   = brand.Login
)

// LoadBrands reads every *.yaml and *.yml in dir, or the built-in demo brands (files
// like any other, in pact/brands) when dir is empty. Errors name the file,
// line and field.
func LoadBrands(dir string) (map[string]*Brand, error) {
	if dir == "" {
		sub, err := fs.Sub(builtinBrands, "brands")
		if err != nil {
			return nil, err
		}
		return brand.LoadFS(sub, "pact/brands")
	}
	return brand.Load(dir)
}

// InterfaceURL is a brand's A2A interface URL at a Provider whose public
// URL is baseURL: its receipts' and tokens' aud, a ledger row's brand.
func InterfaceURL(baseURL, brandID string) string { return provider.InterfaceURL(baseURL, brandID) }

// ServedBrand is how a delegating brand of a Provider is reached from
// outside it: its interface URL (the receipts' and tokens' aud), its
// authorization server's issuer and the JWKS its keys are published at.
type ServedBrand struct {
	ID, InterfaceURL, Issuer, JWKSURI string
}

// ServedBrands lists the delegating brands of brands as a Provider at
// baseURL serves them, by id: what a ledger that does not run the
// Provider trusts to verify its receipts.
func ServedBrands(baseURL string, brands map[string]*Brand) []ServedBrand {
	var out []ServedBrand
	for _, b := range brands {
		if !b.Delegation {
			continue
		}
		iss := provider.Issuer(baseURL, b.ID)
		out = append(out, ServedBrand{ID: b.ID, InterfaceURL: provider.InterfaceURL(baseURL, b.ID), Issuer: iss, JWKSURI: iss + "/jwks.json"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Filed is the retention class brand files give one tool or scope
// (package brand).
type Filed = brand.Filed

// BrandRetention gathers the retention classes brands' tools name, and
// for each scope the class of the tools needing it, by tool and scope:
// where brands disagree, the class whose period under p is the longest
// wins (brand.Merge).
func BrandRetention(brands map[string]*Brand, p retention.Policy) []Filed {
	return brand.Merge(brands, p)
}
