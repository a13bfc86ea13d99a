package pact

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

//go:embed brands/*.yaml
var builtinBrands embed.FS

// Brand is one brand's data: what its card says, the scopes it defines, its
// accounts and records, read by its scripted agent. Brands are data, not
// code: one YAML file each.
type Brand struct {
	ID           string  `yaml:"id"`
	Name         string  `yaml:"name"`
	Description  string  `yaml:"description"`
	Version      string  `yaml:"version"`
	Organization string  `yaml:"organization"`
	Skills       []Skill `yaml:"skills"`
	Scopes       []Scope `yaml:"scopes"`
	// Delegation offers the Delegated profile (PACT §5): the card lists the
	// OAuth device flow and the Provider serves its endpoints.
	Delegation bool      `yaml:"delegation"`
	Accounts   []Account `yaml:"accounts"`
	Orders     []Order   `yaml:"orders"`
}

// Skill is a card skill (informational, PACT §2.1).
type Skill struct {
	ID          string   `yaml:"id" json:"id"`
	Name        string   `yaml:"name" json:"name"`
	Description string   `yaml:"description" json:"description"`
	Tags        []string `yaml:"tags" json:"tags"`
}

// Scope is a scope the brand defines, with the description shown at consent.
type Scope struct {
	ID          string `yaml:"id"`
	Description string `yaml:"description"`
}

// Account is a brand user.
type Account struct {
	ID    string `yaml:"id"`
	Email string `yaml:"email"`
}

// Order is a record the demo agent answers about.
type Order struct {
	ID      string `yaml:"id"`
	Account string `yaml:"account"`
	Status  string `yaml:"status"`
	Total   string `yaml:"total"`
}

var brandID = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

func (b *Brand) validate() error {
	if !brandID.MatchString(b.ID) {
		return fmt.Errorf("brand id %q: lowercase letters, digits and dashes, up to 63", b.ID)
	}
	if b.Name == "" {
		return fmt.Errorf("brand %s: name is required", b.ID)
	}
	if b.Version == "" {
		b.Version = "0.1.0"
	}
	if b.Delegation && len(b.Scopes) == 0 {
		return fmt.Errorf("brand %s: delegation needs at least one scope", b.ID)
	}
	accounts := map[string]bool{}
	for _, a := range b.Accounts {
		accounts[a.ID] = true
	}
	for _, o := range b.Orders {
		if !accounts[o.Account] {
			return fmt.Errorf("brand %s: order %s names unknown account %s", b.ID, o.ID, o.Account)
		}
	}
	return nil
}

func parseBrand(name string, data []byte) (*Brand, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var b Brand
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("brand file %s: %w", name, err)
	}
	if err := b.validate(); err != nil {
		return nil, fmt.Errorf("brand file %s: %w", name, err)
	}
	return &b, nil
}

// LoadBrands reads every *.yaml in dir, or the built-in demo brand when dir
// is empty.
func LoadBrands(dir string) (map[string]*Brand, error) {
	var fsys fs.FS = builtinBrands
	pattern := "brands/*.yaml"
	if dir != "" {
		fsys, pattern = os.DirFS(dir), "*.yaml"
	}
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	out := map[string]*Brand{}
	for _, n := range names {
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		b, err := parseBrand(filepath.Join(dir, n), data)
		if err != nil {
			return nil, err
		}
		if out[b.ID] != nil {
			return nil, fmt.Errorf("brand %s is defined twice", b.ID)
		}
		out[b.ID] = b
	}
	if len(out) == 0 {
		return nil, errors.New("no brand files found")
	}
	return out, nil
}

func (b *Brand) order(id string) *Order {
	for i := range b.Orders {
		if strings.EqualFold(b.Orders[i].ID, id) {
			return &b.Orders[i]
		}
	}
	return nil
}

func (b *Brand) account(id string) *Account {
	for i := range b.Accounts {
		if b.Accounts[i].ID == id {
			return &b.Accounts[i]
		}
	}
	return nil
}
