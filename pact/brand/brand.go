// Package brand reads the brand files of the embedded PACT Provider. A
// brand is data, not code: one YAML file says what its Agent Card shows
// (PACT §2.1), the scopes it defines in the order its card and consent page
// list them (§5.2), its accounts and login (§5.3), the records its agent
// answers about, the tools that agent runs with the scope and retention
// class of each, and the intents that map a customer's message to a tool,
// its arguments and the reply. Load checks every file at start and names
// the file, line and field of anything wrong.
package brand

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// Brand is one brand's data.
type Brand struct {
	ID           string  `yaml:"id"`
	Name         string  `yaml:"name"`
	Description  string  `yaml:"description"`
	Version      string  `yaml:"version"`
	Organization string  `yaml:"organization"`
	Skills       []Skill `yaml:"skills"`
	// Scopes are the permissions the Brand defines, in the order its card
	// and consent page list them.
	Scopes []Scope `yaml:"scopes"`
	// Delegation offers the Delegated profile (PACT §5): the card lists the
	// OAuth device flow and the Provider serves its endpoints.
	Delegation bool `yaml:"delegation"`
	// WithoutToken is what a delegated-only action (a tool that changes
	// the account) gets when the request carries no delegation token:
	// Chat (the default) answers in chat that the customer must sign in and
	// approve; StepUp answers a task in TASK_STATE_AUTH_REQUIRED asking for
	// the tool's scope (PACT §5.5). Either way the ledger gets a refusal.
	WithoutToken Policy `yaml:"withoutToken"`
	// Login is the Brand's own login for the Delegated profile. Without it,
	// the Provider serves the built-in demo login over Accounts' password
	// hashes.
	Login    *Login    `yaml:"login"`
	Accounts []Account `yaml:"accounts"`
	// Records are the kinds of record the agent answers about (orders,
	// bookings, subscriptions...), each with its records or their source.
	Records []*RecordType `yaml:"records"`
	// Tools are what the agent runs, each needing a scope on the card
	// under delegation and naming the retention class of its receipts.
	Tools []*Tool `yaml:"tools"`
	// Intents map a customer's message to a tool (PACT §5.2: the Brand maps
	// its agent's capabilities to scopes, through the tools).
	Intents []*Intent `yaml:"intents"`

	// File is where the brand was read from, for messages.
	File string `yaml:"-"`
}

// Policy is a brand's answer to a delegated-only action asked without a
// delegation token.
type Policy string

// The policies of Brand.WithoutToken.
const (
	Chat   Policy = "chat"
	StepUp Policy = "stepUp"
)

// Skill is a card skill (informational, PACT §2.1), with example requests.
type Skill struct {
	ID          string   `yaml:"id" json:"id"`
	Name        string   `yaml:"name" json:"name"`
	Description string   `yaml:"description" json:"description"`
	Tags        []string `yaml:"tags" json:"tags"`
	Examples    []string `yaml:"examples" json:"examples,omitempty"`
}

// Scope is a scope the brand defines, with the description shown at
// consent.
type Scope struct {
	ID          string `yaml:"id"`
	Description string `yaml:"description"`
}

// Login is a Brand's own login page (PACT §5.3). The page authenticates the
// User, then POSTs a signed, single-use assertion bound to the user_code
// back to the return_to address the Provider gave it.
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

// KeySet returns the parsed Keys.
func (l *Login) KeySet() *jose.JSONWebKeySet { return l.keys }

// Account is a brand user. PasswordHash (bcrypt) lets the User sign in at
// the built-in demo login.
type Account struct {
	ID           string `yaml:"id"`
	Email        string `yaml:"email"`
	PasswordHash string `yaml:"passwordHash"`
}

// Tool is something the agent runs on one record.
type Tool struct {
	// Name names the action in receipts, the action log and refusals.
	Name string `yaml:"name"`
	// Record is the record type it acts on; default the brand's first.
	Record string `yaml:"record"`
	// Scope is the id, among the Brand's scopes, a delegated turn needs for
	// it. Empty: no grant allows it; the agent says so in chat.
	Scope string `yaml:"scope"`
	// Retention is the ledger's class for its receipts: money_moved,
	// account_changed or read_only. A read_only tool is a lookup: it may
	// answer under PACT §3 alone once the customer is verified; any other
	// changes the account and needs a delegation grant.
	Retention string `yaml:"retention"`
	// When lists, per field, the values the record must have for the tool
	// to run; otherwise the agent answers Unavailable and runs nothing.
	When map[string][]string `yaml:"when"`
	// Set is the fields the tool changes, each a template.
	Set map[string]string `yaml:"set"`
	// Unavailable is the reply template when When does not hold.
	Unavailable string `yaml:"unavailable"`

	class       retention.Class
	record      *RecordType
	set         map[string]*template.Template
	unavailable *template.Template
}

// Class is the tool's retention class.
func (t *Tool) Class() retention.Class { return t.class }

// RecordType is the record type the tool acts on.
func (t *Tool) RecordType() *RecordType { return t.record }

// Changes reports whether the tool changes the account (it is not a
// lookup), so that it needs a delegation grant.
func (t *Tool) Changes() bool { return t.class != retention.ReadOnly }

// Intent maps a customer's message to a tool.
type Intent struct {
	Tool string `yaml:"tool"`
	// Words are phrases (matched in lower case) that ask for it.
	Words []string `yaml:"words"`
	// Patterns are regular expressions (RE2) that ask for it; their named
	// groups are available to Args and Reply as .match.<name>.
	Patterns []string `yaml:"patterns"`
	// Args are the tool's arguments, each a template; default the record's
	// id under the record type's name, as {"order": "A-5531"}.
	Args map[string]string `yaml:"args"`
	// Reply is the template the agent answers with once the tool ran.
	Reply string `yaml:"reply"`
	// Prompt is what the agent says when Words matched but no pattern did:
	// it needs what the patterns capture. Required with both.
	Prompt string `yaml:"prompt"`

	tool     *Tool
	patterns []*regexp.Regexp
	args     map[string]*template.Template
	reply    *template.Template
}

// ToolDef is the intent's tool.
func (in *Intent) ToolDef() *Tool { return in.tool }

// fallback reports whether the intent answers any other message.
func (in *Intent) fallback() bool { return len(in.Words) == 0 && len(in.Patterns) == 0 }

// Scope returns the scope with id on the Brand's card, or nil.
func (b *Brand) Scope(id string) *Scope {
	for i := range b.Scopes {
		if b.Scopes[i].ID == id {
			return &b.Scopes[i]
		}
	}
	return nil
}

// ScopeIDs are the ids of the Brand's scopes, in card order.
func (b *Brand) ScopeIDs() []string {
	out := make([]string, len(b.Scopes))
	for i, s := range b.Scopes {
		out[i] = s.ID
	}
	return out
}

// CardOrder returns ids without repeats, in the order of the Brand's card
// (ids not on it last, in their order).
func (b *Brand) CardOrder(ids []string) []string {
	var out []string
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	pos := func(id string) int {
		if i := slices.IndexFunc(b.Scopes, func(s Scope) bool { return s.ID == id }); i >= 0 {
			return i
		}
		return len(b.Scopes)
	}
	slices.SortStableFunc(out, func(x, y string) int { return cmp.Compare(pos(x), pos(y)) })
	return out
}

// Account returns the account with id, or nil.
func (b *Brand) Account(id string) *Account {
	for i := range b.Accounts {
		if b.Accounts[i].ID == id {
			return &b.Accounts[i]
		}
	}
	return nil
}

// Tool returns the tool named name, or nil.
func (b *Brand) Tool(name string) *Tool {
	for _, t := range b.Tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Grantable reports whether a delegation grant could allow tool at this
// Brand: it delegates, and the tool needs a scope on its card.
func (b *Brand) Grantable(tool string) bool {
	t := b.Tool(tool)
	return b.Delegation && t != nil && t.Scope != "" && b.Scope(t.Scope) != nil
}

// Match is what a message asks for: an intent, and what its patterns
// captured.
type Match struct {
	Intent *Intent
	Tool   *Tool
	// Groups are the named groups of the pattern that matched.
	Groups map[string]string
	// NeedsMore: the intent's words matched but none of its patterns did;
	// the agent answers the intent's Prompt.
	NeedsMore bool
}

// Match returns the intent a message asks for: the first whose pattern
// matches or whose words it contains (in lower case), else the one with
// neither, else nil.
func (b *Brand) Match(text string) *Match {
	lower := strings.ToLower(text)
	var fallback *Intent
	for _, in := range b.Intents {
		if in.fallback() {
			fallback = in
			continue
		}
		for _, re := range in.patterns {
			if m := re.FindStringSubmatch(text); m != nil {
				g := in.emptyGroups()
				for i, name := range re.SubexpNames() {
					if name != "" {
						g[name] = strings.TrimSpace(m[i])
					}
				}
				return &Match{Intent: in, Tool: in.tool, Groups: g}
			}
		}
		if slices.ContainsFunc(in.Words, func(w string) bool { return strings.Contains(lower, w) }) {
			return &Match{Intent: in, Tool: in.tool, Groups: in.emptyGroups(), NeedsMore: len(in.patterns) > 0}
		}
	}
	if fallback != nil {
		return &Match{Intent: fallback, Tool: fallback.tool, Groups: map[string]string{}}
	}
	return nil
}

func (in *Intent) emptyGroups() map[string]string {
	g := map[string]string{}
	for _, re := range in.patterns {
		for _, n := range re.SubexpNames() {
			if n != "" {
				g[n] = ""
			}
		}
	}
	return g
}

// FindRecordID finds the first id in text that one of the Brand's record
// types' id patterns matches, and that type.
func (b *Brand) FindRecordID(text string) (*RecordType, string) {
	best, at := (*RecordType)(nil), -1
	var id string
	for _, rt := range b.Records {
		if loc := rt.find.FindStringSubmatchIndex(text); loc != nil && (at < 0 || loc[2] < at) {
			best, at, id = rt, loc[2], text[loc[2]:loc[3]]
		}
	}
	return best, id
}

// RecordType returns the record type named name, or nil.
func (b *Brand) RecordType(name string) *RecordType {
	for _, rt := range b.Records {
		if rt.Type == name {
			return rt
		}
	}
	return nil
}

// Data is what a template sees: the record's fields (id, account and its
// type's fields) at the top, args (.args.<name>), what the intent's pattern
// captured (.match.<name>), and the brand (.brand.name,
// .brand.organization).
type Data map[string]any

// NewData returns the template data of a record.
func (b *Brand) NewData(rec Record, args, groups map[string]string) Data {
	d := Data{}
	for k, v := range rec {
		d[k] = v
	}
	d["args"], d["match"] = args, groups
	d["brand"] = map[string]string{"name": b.Name, "organization": b.Organization}
	return d
}

func render(t *template.Template, d Data) (string, error) {
	var sb strings.Builder
	if err := t.Execute(&sb, d); err != nil {
		return "", err
	}
	return sb.String(), nil
}

// RenderArgs returns the intent's arguments for the data, as the exact
// JSON text the receipt's argsHash covers (keys sorted).
func (in *Intent) RenderArgs(d Data) (map[string]string, string, error) {
	args := map[string]string{}
	for k, t := range in.args {
		v, err := render(t, d)
		if err != nil {
			return nil, "", fmt.Errorf("intent %s: args.%s: %w", in.Tool, k, err)
		}
		args[k] = v
	}
	j, err := json.Marshal(args)
	return args, string(j), err
}

// RenderReply returns the intent's reply for the data.
func (in *Intent) RenderReply(d Data) (string, error) { return render(in.reply, d) }

// RenderSet returns the field changes the tool makes, for the data.
func (t *Tool) RenderSet(d Data) (map[string]string, error) {
	out := map[string]string{}
	for k, tpl := range t.set {
		v, err := render(tpl, d)
		if err != nil {
			return nil, fmt.Errorf("tool %s: set.%s: %w", t.Name, k, err)
		}
		out[k] = v
	}
	return out, nil
}

// Allowed reports whether the record meets the tool's When.
func (t *Tool) Allowed(rec Record) bool {
	for f, vals := range t.When {
		if !slices.Contains(vals, rec[f]) {
			return false
		}
	}
	return true
}

// RenderUnavailable returns the tool's answer when When does not hold.
func (t *Tool) RenderUnavailable(d Data) (string, error) { return render(t.unavailable, d) }

// Retention returns the retention classes the Brand's tools name, and for
// each scope the class among the tools that need it whose period under p
// is the longest, as the ledger's retention.tools and retention.scopes
// tables take them.
func (b *Brand) Retention(p retention.Policy) (tools, scopes map[string]retention.Class) {
	tools, scopes = map[string]retention.Class{}, map[string]retention.Class{}
	for _, t := range b.Tools {
		tools[t.Name] = p.Longer(tools[t.Name], t.class)
		if t.Scope != "" {
			scopes[t.Scope] = p.Longer(scopes[t.Scope], t.class)
		}
	}
	return tools, scopes
}

// Filed is the retention class brand files give one tool or scope.
type Filed struct {
	// Kind is "tool" or "scope".
	Kind string
	Name string
	// Brands is each naming brand's class, by brand id.
	Brands map[string]retention.Class
	// Class is the one among them whose period is the longest.
	Class retention.Class
}

// Disagree reports whether the brands put it in different classes.
func (f Filed) Disagree() bool {
	for _, c := range f.Brands {
		if c != f.Class {
			return true
		}
	}
	return false
}

// ShorterThan lists, sorted, the brands that put it in a class p keeps
// for less than c.
func (f Filed) ShorterThan(c retention.Class, p retention.Policy) []string {
	var ids []string
	for id, bc := range f.Brands {
		if bc != c && p.Longer(c, bc) == c {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// BrandClasses writes each brand's class, sorted by brand id, for logs:
// "otherair: money_moved, skyways: account_changed".
func (f Filed) BrandClasses() string {
	ids := slices.Sorted(maps.Keys(f.Brands))
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id + ": " + f.Brands[id].String()
	}
	return strings.Join(parts, ", ")
}

// Merge gathers the retention tables of brands, tools first, each sorted by
// name: where brands put one tool or scope in different classes, the one
// whose period under p is the longest wins (the configured periods, not a
// fixed order of the classes), so no receipt is kept shorter than one of
// its brands says.
func Merge(brands map[string]*Brand, p retention.Policy) []Filed {
	byName := map[[2]string]*Filed{}
	add := func(kind, name, id string, c retention.Class) {
		f := byName[[2]string{kind, name}]
		if f == nil {
			f = &Filed{Kind: kind, Name: name, Brands: map[string]retention.Class{}}
			byName[[2]string{kind, name}] = f
		}
		f.Brands[id] = c
		f.Class = p.Longer(f.Class, c)
	}
	for id, b := range brands {
		bt, bs := b.Retention(p)
		for name, c := range bt {
			add("tool", name, id, c)
		}
		for name, c := range bs {
			add("scope", name, id, c)
		}
	}
	out := make([]Filed, 0, len(byName))
	for _, f := range byName {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b Filed) int {
		// "tool" before "scope".
		return cmp.Or(-cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Retention merges the retention tables of brands (Merge) under the
// default periods.
func Retention(brands map[string]*Brand) (tools, scopes map[string]retention.Class) {
	tools, scopes = map[string]retention.Class{}, map[string]retention.Class{}
	for _, f := range Merge(brands, retention.DefaultPolicy()) {
		if f.Kind == "tool" {
			tools[f.Name] = f.Class
		} else {
			scopes[f.Name] = f.Class
		}
	}
	return tools, scopes
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
