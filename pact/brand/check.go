package brand

import (
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"

	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

var (
	brandID   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	name      = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)
	scopeID   = regexp.MustCompile(`^[\x21\x23-\x5B\x5D-\x7E]{1,128}$`) // RFC 6749 §3.3 scope-token
	reserved  = []string{"id", "account", "args", "match", "brand"}
	maxIntent = 200
)

// checker validates a decoded brand against its parsed file, so that every
// error names the line.
type checker struct {
	b    *Brand
	at   locator
	fsys fs.FS
	dir  string
}

func (c *checker) check() error {
	b := c.b
	if !brandID.MatchString(b.ID) {
		return c.at.errf(at("id"), "%q: lowercase letters, digits and dashes, up to 63", b.ID)
	}
	if b.Name == "" {
		return c.at.errf(at("name"), "is required")
	}
	if b.Version == "" {
		b.Version = "0.1.0"
	}
	if b.Organization == "" {
		b.Organization = b.Name
	}
	switch b.WithoutToken {
	case "":
		b.WithoutToken = Chat
	case Chat, StepUp:
	default:
		return c.at.errf(at("withoutToken"), "%q: chat or stepUp", b.WithoutToken)
	}
	for i, s := range b.Skills {
		if s.ID == "" || s.Name == "" {
			return c.at.errf(at("skills", i), "a skill needs an id and a name")
		}
		for j, e := range s.Examples {
			if strings.TrimSpace(e) == "" {
				return c.at.errf(at("skills", i, "examples", j), "blank example")
			}
		}
	}
	for i, s := range b.Scopes {
		if !scopeID.MatchString(s.ID) {
			return c.at.errf(at("scopes", i, "id"), "%q is not a scope token (RFC 6749 §3.3)", s.ID)
		}
		if slices.ContainsFunc(b.Scopes[:i], func(o Scope) bool { return o.ID == s.ID }) {
			return c.at.errf(at("scopes", i, "id"), "scope %s is listed twice", s.ID)
		}
		if strings.TrimSpace(s.Description) == "" {
			return c.at.errf(at("scopes", i, "description"), "scope %s needs the description the consent page shows", s.ID)
		}
	}
	if b.Delegation && len(b.Scopes) == 0 {
		return c.at.errf(at("delegation"), "delegation needs at least one scope")
	}
	canLogin := false
	for i, a := range b.Accounts {
		if a.ID == "" {
			return c.at.errf(at("accounts", i, "id"), "is required")
		}
		if slices.ContainsFunc(b.Accounts[:i], func(o Account) bool { return o.ID == a.ID }) {
			return c.at.errf(at("accounts", i, "id"), "account %s is listed twice", a.ID)
		}
		if a.PasswordHash != "" {
			if _, err := bcrypt.Cost([]byte(a.PasswordHash)); err != nil {
				return c.at.errf(at("accounts", i, "passwordHash"), "account %s: not a bcrypt hash", a.ID)
			}
			canLogin = true
		}
	}
	if b.Login != nil {
		if err := b.Login.parse(); err != nil {
			return c.at.errf(at("login"), "%v", err)
		}
	} else if b.Delegation && !canLogin {
		return c.at.errf(at("delegation"), "delegation needs a login: set login (the Brand's own) or passwordHash on accounts (the demo login)")
	}
	for i, rt := range b.Records {
		if err := c.recordType(i, rt); err != nil {
			return err
		}
	}
	for i, t := range b.Tools {
		if err := c.tool(i, t); err != nil {
			return err
		}
	}
	if len(b.Intents) > maxIntent {
		return c.at.errf(at("intents"), "at most %d intents", maxIntent)
	}
	fallbacks := 0
	for i, in := range b.Intents {
		if err := c.intent(i, in); err != nil {
			return err
		}
		if in.fallback() {
			if fallbacks++; fallbacks > 1 {
				return c.at.errf(at("intents", i), "at most one intent without words or patterns (the one that answers any other question)")
			}
		}
	}
	return nil
}

func (c *checker) recordType(i int, rt *RecordType) error {
	p := func(more ...any) []any { return append(at("records", i), more...) }
	if !name.MatchString(rt.Type) {
		return c.at.errf(p("type"), "%q: a lowercase name such as booking", rt.Type)
	}
	if slices.ContainsFunc(c.b.Records[:i], func(o *RecordType) bool { return o.Type == rt.Type }) {
		return c.at.errf(p("type"), "record type %s is listed twice", rt.Type)
	}
	if rt.IDPattern == "" {
		return c.at.errf(p("idPattern"), "is required: the pattern %s ids follow, such as [A-Z]{2}-[0-9]{4}", rt.Type)
	}
	re, err := regexp.Compile(rt.IDPattern)
	if err != nil {
		return c.at.errf(p("idPattern"), "%v", err)
	}
	if re.MatchString("") {
		return c.at.errf(p("idPattern"), "matches an empty id")
	}
	rt.whole = regexp.MustCompile(`(?i)^(?:` + rt.IDPattern + `)$`)
	rt.find = regexp.MustCompile(`(?i)\b(` + rt.IDPattern + `)\b`)
	for j, f := range rt.Fields {
		if !name.MatchString(f) || slices.Contains(reserved, f) {
			return c.at.errf(p("fields", j), "%q: a lowercase name, not one of %s", f, strings.Join(reserved, ", "))
		}
		if slices.Contains(rt.Fields[:j], f) {
			return c.at.errf(p("fields", j), "field %s is listed twice", f)
		}
	}
	switch {
	case rt.Source != "" && len(rt.Items) > 0:
		return c.at.errf(p("source"), "give items or a source, not both")
	case strings.HasPrefix(rt.Source, "http://") || strings.HasPrefix(rt.Source, "https://"):
		if err := verifier.CheckFetchURI(rt.Source, true); err != nil || !strings.Contains(rt.Source, "{id}") {
			return c.at.errf(p("source"), "an https URL (http only on loopback) with {id} in it")
		}
		rt.http = rt.Source
		return nil
	case rt.Source != "":
		return c.sourceFile(p("source"), rt)
	}
	return c.items(rt, c.at, p("items"))
}

// sourceFile reads a record type's records from a JSON or YAML file beside
// the brand file.
func (c *checker) sourceFile(p []any, rt *RecordType) error {
	name := path.Join(c.dir, rt.Source)
	if !fs.ValidPath(name) || path.IsAbs(rt.Source) {
		return c.at.errf(p, "%q: a path relative to the brand file, inside its directory", rt.Source)
	}
	data, err := readBounded(c.fsys, name)
	if err != nil {
		return c.at.errf(p, "%q: %v", rt.Source, err)
	}
	shown := path.Join(path.Dir(c.at.file), rt.Source)
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil { // JSON is YAML
		return yamlError(shown, err)
	}
	if err := root.Decode(&rt.Items); err != nil {
		return yamlError(shown, err)
	}
	return c.items(rt, locator{file: shown, root: &root}, nil)
}

// items checks records: an id that matches the pattern whole, once; a
// known account; only the type's fields. Missing fields are empty.
func (c *checker) items(rt *RecordType, loc locator, prefix []any) error {
	p := func(more ...any) []any { return append(slices.Clone(prefix), more...) }
	rt.byID = make(map[string]Record, len(rt.Items))
	for j, r := range rt.Items {
		if r == nil {
			return loc.errf(p(j), "an empty record")
		}
		if !rt.whole.MatchString(r.ID()) {
			return loc.errf(p(j, "id"), "%q does not match idPattern %s", r.ID(), rt.IDPattern)
		}
		key := foldID(r.ID())
		if o, ok := rt.byID[key]; ok {
			return loc.errf(p(j, "id"), "%s %s is listed twice (also as %s)", rt.Type, r.ID(), o.ID())
		}
		rt.byID[key] = r
		if c.b.Account(r.Account()) == nil {
			return loc.errf(p(j, "account"), "%s %s names unknown account %q", rt.Type, r.ID(), r.Account())
		}
		for k := range r {
			if k != "id" && k != "account" && !slices.Contains(rt.Fields, k) {
				return loc.errf(p(j, k), "%s has no field %s (fields: %s)", rt.Type, k, strings.Join(rt.Fields, ", "))
			}
		}
		for _, f := range rt.Fields {
			if _, ok := r[f]; !ok {
				r[f] = ""
			}
		}
	}
	return nil
}

func (c *checker) tool(i int, t *Tool) error {
	b := c.b
	p := func(more ...any) []any { return append(at("tools", i), more...) }
	if !name.MatchString(t.Name) {
		return c.at.errf(p("name"), "%q: a lowercase name such as rebook_flight", t.Name)
	}
	if slices.ContainsFunc(b.Tools[:i], func(o *Tool) bool { return o.Name == t.Name }) {
		return c.at.errf(p("name"), "tool %s is listed twice", t.Name)
	}
	switch {
	case t.Record == "" && len(b.Records) > 0:
		t.record = b.Records[0]
	case t.Record == "":
		return c.at.errf(p("record"), "tool %s acts on a record, and the brand defines none (records:)", t.Name)
	default:
		if t.record = b.RecordType(t.Record); t.record == nil {
			return c.at.errf(p("record"), "%q is not one of the brand's record types", t.Record)
		}
	}
	if t.Scope != "" && b.Scope(t.Scope) == nil {
		return c.at.errf(p("scope"), "%q is not among the brand's scopes", t.Scope)
	}
	cl, err := retention.ParseClass(t.Retention)
	if err != nil || (cl != retention.MoneyMoved && cl != retention.AccountChanged && cl != retention.ReadOnly) {
		return c.at.errf(p("retention"), "%q: money_moved, account_changed or read_only", t.Retention)
	}
	t.class = cl
	if len(t.Set) > 0 && !t.Changes() {
		return c.at.errf(p("set"), "a read_only tool changes nothing")
	}
	for f := range t.When {
		if !c.isField(t.record, f) {
			return c.at.errf(p("when", f), "%s has no field %s", t.record.Type, f)
		}
	}
	// Set and Unavailable may use the args of the intents that run the
	// tool: each intent runs them on its own sample (intent).
	t.set = map[string]*template.Template{}
	for f, src := range t.Set {
		if !slices.Contains(t.record.Fields, f) {
			return c.at.errf(p("set", f), "%s has no field %s it could change", t.record.Type, f)
		}
		if t.set[f], err = c.template(p("set", f), src, nil); err != nil {
			return err
		}
		if !fromArgs(t.set[f]) {
			return c.at.errf(p("set", f), "the tool %s writes %s from %q, which the signed args may not hold: a value a tool sets must be fixed text and {{.args.<name>}}, so that the receipt's argsHash covers what the tool wrote (put what it needs in the intent's args, as %s: \"{{.match.<name>}}\", and set it from {{.args.%s}})", t.Name, f, src, f, f)
		}
	}
	if len(t.When) > 0 && t.Unavailable == "" {
		return c.at.errf(p("unavailable"), "a tool with when needs the reply for when it does not hold")
	}
	if t.Unavailable != "" {
		if t.unavailable, err = c.template(p("unavailable"), t.Unavailable, nil); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) intent(i int, in *Intent) error {
	p := func(more ...any) []any { return append(at("intents", i), more...) }
	if in.tool = c.b.Tool(in.Tool); in.tool == nil {
		return c.at.errf(p("tool"), "%q is not one of the brand's tools", in.Tool)
	}
	for j, w := range in.Words {
		if strings.TrimSpace(w) == "" {
			return c.at.errf(p("words", j), "blank word")
		}
		in.Words[j] = strings.ToLower(w)
	}
	for j, src := range in.Patterns {
		re, err := regexp.Compile(src)
		if err != nil {
			return c.at.errf(p("patterns", j), "%v", err)
		}
		in.patterns = append(in.patterns, re)
	}
	if in.fallback() && in.tool.Changes() {
		return c.at.errf(p("tool"), "the intent without words or patterns answers any question: its tool must be read_only")
	}
	if len(in.Words) > 0 && len(in.patterns) > 0 && strings.TrimSpace(in.Prompt) == "" {
		return c.at.errf(p("prompt"), "an intent with words and patterns needs a prompt: what to ask when the words match and no pattern does")
	}
	rt := in.tool.record
	if in.Args == nil {
		in.Args = map[string]string{rt.Type: "{{.id}}"}
	}
	groups := in.emptyGroups()
	args := map[string]string{}
	in.args = map[string]*template.Template{}
	var err error
	for k, src := range in.Args {
		if !name.MatchString(k) {
			return c.at.errf(p("args", k), "%q: a lowercase argument name", k)
		}
		if in.args[k], err = c.template(p("args", k), src, c.sample(rt, nil, groups)); err != nil {
			return err
		}
		args[k] = "x"
	}
	if in.tool.Changes() && !c.argsNameRecord(rt, in, groups) {
		return c.at.errf(p("args"), "the tool %s changes records: one of the args must name the record (\"{{.id}}\"), so that the receipt's argsHash covers which record it changed", in.Tool)
	}
	if strings.TrimSpace(in.Reply) == "" {
		return c.at.errf(p("reply"), "is required: what the agent answers")
	}
	sample := c.sample(rt, args, groups)
	if in.reply, err = c.template(p("reply"), in.Reply, sample); err != nil {
		return err
	}
	// The tool's templates, with this intent's args and groups.
	t, tp := in.tool, at("tools", slices.Index(c.b.Tools, in.tool))
	for f, tpl := range t.set {
		if _, err := render(tpl, sample); err != nil {
			return c.at.errf(append(tp, "set", f), "with the args of intents[%d] (%s): %v", i, fieldPath(p("args")), err)
		}
	}
	if t.unavailable != nil {
		if _, err := render(t.unavailable, sample); err != nil {
			return c.at.errf(append(tp, "unavailable"), "with the args of intents[%d]: %v", i, err)
		}
	}
	return nil
}

func (c *checker) isField(rt *RecordType, f string) bool {
	return f == "id" || f == "account" || slices.Contains(rt.Fields, f)
}

// sample is template data with every name a template may use, to find
// mistakes at start rather than in a customer's chat.
func (c *checker) sample(rt *RecordType, args, groups map[string]string) Data {
	rec := Record{"id": "X", "account": "x"}
	for _, f := range rt.Fields {
		rec[f] = "x"
	}
	if args == nil {
		args = map[string]string{}
	}
	if groups == nil {
		groups = map[string]string{}
	}
	return c.b.NewData(rec, args, groups)
}

// recordIDSample is the record id argsNameRecord renders the args with.
const recordIDSample = "record-id-sample-7f3a9c"

// argsNameRecord reports whether one of the intent's args, rendered,
// holds the record's id: a receipt's actions carry the tool and the hash
// of its args alone, so a tool that changes a record must name it there
// for the signature to cover which record it changed.
func (c *checker) argsNameRecord(rt *RecordType, in *Intent, groups map[string]string) bool {
	sample := c.sample(rt, nil, groups)
	sample["id"] = recordIDSample
	for _, t := range in.args {
		if out, err := render(t, sample); err == nil && strings.Contains(out, recordIDSample) {
			return true
		}
	}
	return false
}

func (c *checker) template(p []any, src string, sample Data) (*template.Template, error) {
	t, err := template.New(fieldPath(p)).Option("missingkey=error").Parse(src)
	if err != nil {
		return nil, c.at.errf(p, "template: %v", err)
	}
	if sample == nil {
		return t, nil
	}
	if _, err := render(t, sample); err != nil {
		return nil, c.at.errf(p, "template names something the record, args or match do not have: %v", err)
	}
	return t, nil
}

// fromArgs reports whether a set template is fixed text and bare
// {{.args.<name>}} alone: what the tool writes is then the signed args
// and the brand file, nothing else. A receipt's action carries the tool
// and the hash of its args, so a value drawn from anything else (a
// pattern's group, the record's other fields, a function of the args)
// would change the record to what no signature covers.
func fromArgs(t *template.Template) bool {
	if t.Tree == nil || t.Tree.Root == nil {
		return true
	}
	for _, n := range t.Tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
		case *parse.ActionNode:
			if n.Pipe == nil || len(n.Pipe.Decl) > 0 || len(n.Pipe.Cmds) != 1 || len(n.Pipe.Cmds[0].Args) != 1 {
				return false
			}
			f, ok := n.Pipe.Cmds[0].Args[0].(*parse.FieldNode)
			if !ok || len(f.Ident) != 2 || f.Ident[0] != "args" {
				return false
			}
		default:
			return false
		}
	}
	return true
}
