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
	// Intents are the requests the scripted agent understands, each with
	// the scope on the card it needs under delegation (PACT §5.2: the
	// Brand maps its agent's capabilities to scopes).
	Intents []Intent `yaml:"intents"`
}

// Intent is one request the scripted agent understands: the tool that
// answers it, the words that ask for it, and the scope a delegated turn
// needs for it.
type Intent struct {
	// Tool is what the agent runs: lookup_orders, cancel_order,
	// issue_refund or change_address. It names the action in receipts and
	// refusals.
	Tool string `yaml:"tool"`
	// Words are phrases (matched in lower case) that ask for it. An intent
	// without words answers any other question about an order.
	Words []string `yaml:"words"`
	// Scope is the id, among the Brand's scopes, that a delegated turn
	// needs for it. Empty: the Brand offers no permission for it, and the
	// agent says in chat that it cannot do that here (no step-up).
	Scope string `yaml:"scope"`
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
	defaults := 0
	for i, in := range b.Intents {
		if _, ok := scriptedTools[in.Tool]; !ok {
			return fmt.Errorf("brand %s: intent %d: tool %q is not one the scripted agent runs", b.ID, i+1, in.Tool)
		}
		if in.Scope != "" && b.scope(in.Scope) == nil {
			return fmt.Errorf("brand %s: intent %s needs scope %q, which is not among the brand's scopes", b.ID, in.Tool, in.Scope)
		}
		if len(in.Words) == 0 {
			defaults++
		}
		for j, w := range in.Words {
			if strings.TrimSpace(w) == "" {
				return fmt.Errorf("brand %s: intent %s: blank word", b.ID, in.Tool)
			}
			b.Intents[i].Words[j] = strings.ToLower(w)
		}
	}
	if defaults > 1 {
		return fmt.Errorf("brand %s: at most one intent without words", b.ID)
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

// scope returns the scope with id on the Brand's card, or nil.
func (b *Brand) scope(id string) *Scope {
	for i := range b.Scopes {
		if b.Scopes[i].ID == id {
			return &b.Scopes[i]
		}
	}
	return nil
}

// grantable reports whether a delegation grant could allow tool at this
// Brand: it delegates, and an intent maps the tool to a scope on its card.
func (b *Brand) grantable(tool string) bool {
	if !b.Delegation {
		return false
	}
	for _, in := range b.Intents {
		if in.Tool == tool && in.Scope != "" && b.scope(in.Scope) != nil {
			return true
		}
	}
	return false
}

// intent returns the intent a message (in lower case) asks for: the first
// whose words it contains, else the one without words, else nil.
func (b *Brand) intent(text string) *Intent {
	var fallback *Intent
	for i := range b.Intents {
		in := &b.Intents[i]
		if len(in.Words) == 0 {
			fallback = in
		}
		for _, w := range in.Words {
			if strings.Contains(text, w) {
				return in
			}
		}
	}
	return fallback
}

func (b *Brand) account(id string) *Account {
	for i := range b.Accounts {
		if b.Accounts[i].ID == id {
			return &b.Accounts[i]
		}
	}
	return nil
}
