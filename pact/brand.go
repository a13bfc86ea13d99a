package pact

import (
	"embed"
	"io/fs"

	"github.com/pactledger/pactledger/pact/brand"
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

// LoadBrands reads every *.yaml in dir, or the built-in demo brands (files
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
