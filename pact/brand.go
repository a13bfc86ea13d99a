package pact

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rsa"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"

	"github.com/pactledger/pactledger/verifier"
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
	Delegation bool `yaml:"delegation"`
	// Login is the Brand's own login for the Delegated profile: where the
	// verification link sends the User, and the keys that sign the
	// assertion it returns them with. Without it, the Provider serves the
	// built-in demo login over Accounts' password hashes.
	Login    *Login    `yaml:"login"`
	Accounts []Account `yaml:"accounts"`
	Orders   []Order   `yaml:"orders"`
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

// Login is a Brand's own login page (PACT §5.3). The page authenticates
// the User, then POSTs a signed, single-use assertion bound to the
// user_code back to the return_to address the Provider gave it.
type Login struct {
	// URL of the Brand's login page; the Provider adds return_to and
	// user_code to it.
	URL string `yaml:"url"`
	// Issuer is the iss of the Brand's assertions.
	Issuer string `yaml:"issuer"`
	// Keys is the JWKS (public keys, ES256 or RS256) that verify them.
	Keys string `yaml:"keys"`

	keys *jose.JSONWebKeySet
}

// Account is a brand user. PasswordHash (bcrypt) lets the User sign in at
// the built-in demo login.
type Account struct {
	ID           string `yaml:"id"`
	Email        string `yaml:"email"`
	PasswordHash string `yaml:"passwordHash"`
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
	canLogin := false
	for _, a := range b.Accounts {
		accounts[a.ID] = true
		if a.PasswordHash != "" {
			if _, err := bcrypt.Cost([]byte(a.PasswordHash)); err != nil {
				return fmt.Errorf("brand %s: account %s: passwordHash is not a bcrypt hash", b.ID, a.ID)
			}
			canLogin = true
		}
	}
	if b.Login != nil {
		if err := b.Login.parse(); err != nil {
			return fmt.Errorf("brand %s: login: %w", b.ID, err)
		}
	} else if b.Delegation && !canLogin {
		return fmt.Errorf("brand %s: delegation needs a login: set login (the Brand's own) or passwordHash on accounts (the demo login)", b.ID)
	}
	for _, o := range b.Orders {
		if !accounts[o.Account] {
			return fmt.Errorf("brand %s: order %s names unknown account %s", b.ID, o.ID, o.Account)
		}
	}
	return nil
}

// parse checks a Brand login's settings and reads its keys.
func (l *Login) parse() error {
	// The same rule as fetched key URLs: https, or http on loopback.
	if err := verifier.CheckFetchURI(l.URL, true); err != nil {
		return fmt.Errorf("url: %w", err)
	}
	if l.Issuer == "" {
		return errors.New("issuer is required")
	}
	var ks jose.JSONWebKeySet
	if err := json.Unmarshal([]byte(l.Keys), &ks); err != nil {
		return fmt.Errorf("keys must be a JWKS: %w", err)
	}
	for _, k := range ks.Keys {
		if !k.IsPublic() || k.KeyID == "" {
			return errors.New("keys must be public keys, each with a kid")
		}
		switch k.Key.(type) {
		case *ecdsa.PublicKey, *rsa.PublicKey:
		default:
			return fmt.Errorf("key %s: only EC (ES256) and RSA (RS256) keys", k.KeyID)
		}
	}
	if len(ks.Keys) == 0 {
		return errors.New("keys has no keys")
	}
	l.keys = &ks
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
