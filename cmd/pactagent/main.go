// Command pactagent is a reference personal agent for PACT 1.0, Identity
// and Delegated profiles: it keeps its own ES256 signing key, serves its
// JWKS, fetches a Brand's Agent Card, picks the HTTP+JSON 1.0 interface, and
// sends messages with a fresh personal-agent JWT (120 s) each time,
// continuing the conversation per (card, user). With a Brand that offers
// delegation it asks for scopes, shows the User the Brand's sign-in link
// (it never sees the login), waits for the approval, sends with the
// delegation token, asks again when a turn needs more (step-up), and
// verifies and keeps every receipt.
//
//	pactagent init      --dir DIR --issuer URL --audience AUD
//	pactagent jwks      --dir DIR
//	pactagent serve     --dir DIR --listen ADDR
//	pactagent authorize --dir DIR --card URL --user SUB [--scope "ID ..."]
//	pactagent send      --dir DIR --card URL --user SUB [--new] [--json] [--identity-only] TEXT
//	pactagent receipts  --dir DIR
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/buildinfo"
	"github.com/pactledger/pactledger/pact/a2a"
	"github.com/pactledger/pactledger/pact/client"
)

const usage = `usage:
  pactagent init  --dir DIR --issuer URL --audience AUD   create the signing key and settings
  pactagent jwks  --dir DIR                               print the public JWKS (for registration)
  pactagent serve --dir DIR [--listen ADDR]               serve the JWKS at /.well-known/jwks.json (on the
                                                          issuer's address when it is http://127.0.0.1:PORT)
  pactagent authorize --dir DIR --card URL --user SUB [--scope "ID ..."]
                                                          ask the Brand for scopes (without --scope: list them);
                                                          the user signs in with the Brand at the link shown
  pactagent send  --dir DIR --card URL --user SUB [--new] [--json] [--identity-only] TEXT
                                                          send TEXT as user SUB, continuing its conversation,
                                                          with the user's delegation when there is one
  pactagent receipts --dir DIR                            list the verified receipts kept
  pactagent --version                                     print the module version and VCS revision
`

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pactagent:", err)
		var u usageErr
		if errors.As(err, &u) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// commands are pactagent's commands, as run dispatches them.
var commands = []string{"init", "jwks", "serve", "send", "authorize", "receipts"}

type usageErr struct{ msg string }

func (e usageErr) Error() string { return e.msg }

// settings are kept in DIR/agent.json; the key in DIR/key.json (0600).
type settings struct {
	Issuer   string `json:"issuer"`
	Audience string `json:"audience"`
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return usageErr{"no command"}
	}
	switch args[0] {
	case "--version", "-version", "version":
		_, err := fmt.Fprintln(out, "pactagent", buildinfo.Read().String())
		return err
	case "-h", "-help", "--help", "help":
		_, err := fmt.Fprint(out, usage)
		return err
	}
	if !slices.Contains(commands, args[0]) {
		return usageErr{"unknown command " + args[0]}
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", "", "")
	issuer := fs.String("issuer", "", "")
	audience := fs.String("audience", "", "")
	listen := fs.String("listen", "", "")
	card := fs.String("card", "", "")
	user := fs.String("user", "", "")
	fresh := fs.Bool("new", false, "")
	asJSON := fs.Bool("json", false, "")
	scope := fs.String("scope", "", "")
	identityOnly := fs.Bool("identity-only", false, "")
	if err := fs.Parse(args[1:]); errors.Is(err, flag.ErrHelp) {
		_, err := fmt.Fprint(out, usage)
		return err
	} else if err != nil {
		return usageErr{err.Error()}
	}
	// flag stops at the first word that is not a flag: a flag after the
	// text would be read as text (unless "--" ended the flags).
	ended := len(args)-1-fs.NArg() > 0 && args[len(args)-1-fs.NArg()] == "--"
	for _, a := range fs.Args() {
		if ended {
			break
		}
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && fs.Lookup(name) != nil {
			return usageErr{fmt.Sprintf("%s after the text: flags go before it (pactagent %s --dir DIR ... TEXT)", a, args[0])}
		}
	}
	if *dir == "" {
		return usageErr{"--dir is required"}
	}
	switch args[0] {
	case "init":
		if *issuer == "" || *audience == "" {
			return usageErr{"init needs --issuer and --audience"}
		}
		return initAgent(*dir, *issuer, *audience, out)
	case "jwks":
		b, err := jwks(*dir)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(b))
		return err
	case "serve":
		h, err := jwksHandler(*dir)
		if err != nil {
			return err
		}
		_, st, err := load(*dir)
		if err != nil {
			return err
		}
		addr, note := listenAddr(*listen, st.Issuer)
		if note != "" {
			fmt.Fprintln(out, note)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go func() { <-ctx.Done(); _ = srv.Close() }()
		fmt.Fprintf(out, "serving the JWKS at http://%s/.well-known/jwks.json\n", addr)
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	case "send":
		if *card == "" || *user == "" || fs.NArg() == 0 {
			return usageErr{"send needs --card, --user and the text"}
		}
		return send(*dir, *card, *user, strings.Join(fs.Args(), " "), sendOpts{fresh: *fresh, asJSON: *asJSON, identityOnly: *identityOnly}, out)
	case "authorize":
		if *card == "" || *user == "" {
			return usageErr{"authorize needs --card and --user"}
		}
		return authorizeCmd(*dir, *card, *user, strings.FieldsFunc(*scope, func(r rune) bool { return r == ' ' || r == ',' }), out)
	case "receipts":
		return listReceipts(*dir, out)
	}
	return usageErr{"unknown command " + args[0]}
}

func initAgent(dir, issuer, audience string, out io.Writer) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	keyPath := filepath.Join(dir, "key.json")
	if _, err := os.Stat(keyPath); err == nil {
		return fmt.Errorf("%s exists: the agent already has a key", keyPath)
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	kid := make([]byte, 6)
	_, _ = rand.Read(kid)
	jwk := jose.JSONWebKey{Key: priv, KeyID: "pa-" + hex.EncodeToString(kid), Algorithm: string(jose.ES256), Use: "sig"}
	b, err := jwk.MarshalJSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, b, 0o600); err != nil {
		return err
	}
	s, _ := json.MarshalIndent(settings{Issuer: strings.TrimRight(issuer, "/"), Audience: audience}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "agent.json"), s, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(out, "created key %s for issuer %s; register the issuer with jwksUri %s/.well-known/jwks.json at the Provider\n", jwk.KeyID, issuer, strings.TrimRight(issuer, "/"))
	return nil
}

func load(dir string) (*jose.JSONWebKey, settings, error) {
	var s settings
	b, err := os.ReadFile(filepath.Join(dir, "agent.json"))
	if err != nil {
		return nil, s, fmt.Errorf("read settings (run pactagent init first): %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, s, err
	}
	kb, err := os.ReadFile(filepath.Join(dir, "key.json"))
	if err != nil {
		return nil, s, err
	}
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(kb); err != nil {
		return nil, s, err
	}
	return &k, s, nil
}

// defaultListen is where serve listens when neither --listen nor the
// issuer says.
const defaultListen = "127.0.0.1:8099"

// listenAddr is where serve listens: --listen, else the issuer's own
// address when it is plain HTTP on this machine (where the Provider will
// fetch the JWKS), else defaultListen. note, when set, says that the JWKS
// will not be where the issuer's jwksUri points.
func listenAddr(flagListen, issuer string) (addr, note string) {
	u, err := url.Parse(issuer)
	local := err == nil && u.Scheme == "http" && u.Port() != "" && slices.Contains([]string{"127.0.0.1", "localhost", "::1"}, u.Hostname())
	switch {
	case flagListen == "" && local:
		return u.Host, ""
	case flagListen == "":
		return defaultListen, ""
	case local && flagListen != u.Host:
		return flagListen, fmt.Sprintf("note: the issuer's jwksUri is %s/.well-known/jwks.json, not on %s: the Provider will not find this JWKS there", issuer, flagListen)
	}
	return flagListen, ""
}

func jwks(dir string) ([]byte, error) {
	k, _, err := load(dir)
	if err != nil {
		return nil, err
	}
	return json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.Public()}})
}

func jwksHandler(dir string) (http.Handler, error) {
	body, err := jwks(dir)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	return mux, nil
}

// signer mints personal-agent JWTs (PACT §3.2): ES256, 120 s lifetime.
func signer(k *jose.JSONWebKey, s settings) (func(sub string) (string, error), error) {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: *k}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	return func(sub string) (string, error) {
		now := time.Now()
		jti := make([]byte, 8)
		_, _ = rand.Read(jti)
		claims, _ := json.Marshal(map[string]any{"iss": s.Issuer, "sub": sub, "aud": s.Audience, "iat": now.Unix(), "exp": now.Add(120 * time.Second).Unix(), "jti": hex.EncodeToString(jti)})
		jws, err := sig.Sign(claims)
		if err != nil {
			return "", err
		}
		return jws.CompactSerialize()
	}, nil
}

// agent is a loaded personal agent talking to one Brand.
type agent struct {
	dir      string
	settings settings
	kid      string // the signing key's id
	c        *client.Client
	card     *client.Card
	iface    string
	user     string
	out      io.Writer
}

func connect(dir, cardURL, user string, out io.Writer) (*agent, error) {
	k, s, err := load(dir)
	if err != nil {
		return nil, err
	}
	tok, err := signer(k, s)
	if err != nil {
		return nil, err
	}
	c := &client.Client{Token: tok, Issuer: s.Issuer, HTTP: &http.Client{Timeout: 30 * time.Second}}
	// PACT §6: on 429 wait Retry-After before trying again.
	c.OnRateLimited = func(wait time.Duration, retry int) {
		fmt.Fprintf(out, "The Brand is busy (HTTP 429): trying again in %s (%d of %d).\n", wait, retry, client.RateLimitRetries)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	card, err := c.FetchCard(ctx, cardURL)
	if err != nil {
		return nil, explainCard(ctx, c, cardURL, err)
	}
	iface, err := card.Interface()
	if err != nil {
		return nil, err
	}
	return &agent{dir: dir, settings: s, kid: k.KeyID, c: c, card: card, iface: iface, user: user, out: out}, nil
}

type sendOpts struct{ fresh, asJSON, identityOnly bool }

// send sends one message, continuing the user's conversation with the
// card's Brand unless fresh, and remembers the context in DIR/contexts.json.
// With the user's delegation for this Brand it sends the token, handles a
// step-up, and verifies and keeps the receipt.
func send(dir, cardURL, user, text string, o sendOpts, out io.Writer) (err error) {
	a, err := connect(dir, cardURL, user, out)
	if err != nil {
		return err
	}
	contextID := ""
	defer func() { err = a.explain(err, contextID) }()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctxPath := filepath.Join(dir, "contexts.json")
	contexts := map[string]string{}
	if b, err := os.ReadFile(ctxPath); err == nil {
		_ = json.Unmarshal(b, &contexts)
	}
	key := a.iface + " " + user
	contextID = contexts[key]
	if o.fresh {
		contextID = ""
	}
	flow, delegating := a.card.Delegation()
	var g *grantFile
	if delegating && !o.identityOnly {
		if g, err = a.grant(ctx, flow); err != nil {
			return err
		}
	}
	if o.identityOnly {
		// PACT §3 alone: a step-up is shown, not answered.
		flow = nil
	}
	r, g, err := a.converse(ctx, flow, g, contextID, text)
	if err != nil {
		return err
	}
	contexts[key] = r.ContextID()
	b, _ := json.MarshalIndent(contexts, "", "  ")
	if err := os.WriteFile(ctxPath, b, 0o600); err != nil {
		return err
	}
	if r.Task != nil {
		return a.showStepUp(r.Task, delegating, o.asJSON)
	}
	reply := r.Message
	var receipt *client.Receipt
	if g != nil {
		if receipt, err = a.c.VerifyReceipt(ctx, flow, a.iface, reply); err != nil {
			fmt.Fprintf(out, "%s\n", client.ReplyText(reply))
			return fmt.Errorf("the reply's receipt did not verify, so it is not kept: %w", err)
		}
		if err := a.keepReceipt(receipt); err != nil {
			return err
		}
	}
	if o.asJSON {
		return json.NewEncoder(out).Encode(map[string]any{"message": reply, "receipt": receipt})
	}
	_, err = fmt.Fprintf(out, "%s\n(context %s)\n", client.ReplyText(reply), reply.ContextID)
	if receipt != nil {
		fmt.Fprintf(out, "receipt verified against %s: grant %s, scopes used [%s], actions [%s]; kept as receipts/%s.json\n",
			receipt.KeysURL, receipt.Claims.GrantID, strings.Join(receipt.Claims.ScopesUsed, " "), actionList(receipt.Claims.Actions), receipt.SHA256)
	}
	return err
}

func actionList(as []a2a.ReceiptAction) string {
	var s []string
	for _, a := range as {
		s = append(s, a.Tool)
	}
	return strings.Join(s, " ")
}

// converse sends text, with the user's delegation token when g is set, and
// returns the reply and the grant it was sent under. A step-up (PACT §5.5)
// is a task in TASK_STATE_AUTH_REQUIRED naming the missing scopes: a turn
// that needs a scope the token lacks, or, at a Brand whose account actions
// step up without a token (withoutToken: stepUp), an account action asked
// under §3 alone. With flow, converse asks the Brand for the missing scopes
// (with those already held), shows the user the link, waits, and sends
// again in the same context with the new token. Without flow (the Brand
// offers no delegation, or the user chose §3 alone) the task is the reply.
func (a *agent) converse(ctx context.Context, flow *client.DeviceFlow, g *grantFile, contextID, text string) (*client.SendReply, *grantFile, error) {
	for range 3 {
		var r *client.SendReply
		var err error
		if g == nil {
			r, err = a.c.Send(ctx, a.iface, a.user, contextID, "", text)
		} else {
			r, err = a.c.SendDelegated(ctx, a.iface, a.user, contextID, "", text, g.Token.AccessToken)
		}
		var se *client.SendError
		if g != nil && errors.As(err, &se) && se.Status == http.StatusUnauthorized && strings.Contains(se.Message, "invalid_token") {
			_ = a.dropGrant()
			return nil, nil, errors.New("the Brand refused the delegation token (the grant was revoked or has expired); run pactagent authorize again")
		}
		if errors.As(err, &se) && se.Reason == a2a.ReasonUnsupported && contextID != "" {
			// The Brand closed the conversation: start a new one.
			contextID = ""
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if r.Message != nil {
			return r, g, nil
		}
		if r.Task.Status.State != "TASK_STATE_AUTH_REQUIRED" || len(r.Task.Metadata.MissingScopes) == 0 {
			return nil, nil, fmt.Errorf("the Brand answered with a task in state %s", r.Task.Status.State)
		}
		if flow == nil {
			return r, g, nil
		}
		if r.Task.Status.Message != nil {
			fmt.Fprintln(a.out, client.ReplyText(r.Task.Status.Message))
		}
		// PACT §5.5: repeat §5.3 for the missing scopes, keeping the ones held.
		var want []string
		if g != nil {
			want = slices.Clone(g.Token.Scopes)
		}
		want = append(want, r.Task.Metadata.MissingScopes...)
		slices.Sort(want)
		ts, err := a.authorize(ctx, flow, slices.Compact(want))
		if err != nil {
			return nil, nil, err
		}
		for _, m := range r.Task.Metadata.MissingScopes {
			if !slices.Contains(ts.Scopes, m) {
				return nil, nil, fmt.Errorf("the user did not allow %s, which this needs", m)
			}
		}
		g = &grantFile{Token: *ts}
		contextID = r.Task.ContextID
	}
	return nil, nil, errors.New("the Brand kept asking for more permission")
}

// showStepUp prints a step-up task the agent does not answer itself (PACT
// §3 alone): the Brand's message and its sign-in link. delegating says
// whether sending without --identity-only would ask for the permission.
func (a *agent) showStepUp(t *client.Task, delegating, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(a.out).Encode(map[string]any{"task": t})
	}
	if t.Status.Message != nil {
		fmt.Fprintln(a.out, client.ReplyText(t.Status.Message))
	}
	scopes := strings.Join(t.Metadata.MissingScopes, " ")
	if l := t.Metadata.VerificationURIComplete; l != "" {
		fmt.Fprintf(a.out, "To allow it (%s), sign in with %s at:\n  %s\n", scopes, a.card.Organization(), l)
	}
	if delegating {
		fmt.Fprintf(a.out, "Or send again without --identity-only: pactagent then asks %s for %s itself and carries on in this conversation.\n", a.card.Organization(), scopes)
	}
	_, err := fmt.Fprintf(a.out, "(context %s)\n", t.ContextID)
	return err
}

// grantFile is the user's delegation at one Brand, kept in DIR/grants.json.
type grantFile struct {
	Token client.TokenSet `json:"token"`
}

func (a *agent) grantsPath() string { return filepath.Join(a.dir, "grants.json") }

func (a *agent) grants() map[string]*grantFile {
	gs := map[string]*grantFile{}
	if b, err := os.ReadFile(a.grantsPath()); err == nil {
		_ = json.Unmarshal(b, &gs)
	}
	return gs
}

func (a *agent) saveGrant(g *grantFile) error {
	gs := a.grants()
	if g == nil {
		delete(gs, a.iface+" "+a.user)
	} else {
		gs[a.iface+" "+a.user] = g
	}
	b, _ := json.MarshalIndent(gs, "", "  ")
	return os.WriteFile(a.grantsPath(), b, 0o600)
}

func (a *agent) dropGrant() error { return a.saveGrant(nil) }

// grant returns the user's delegation for this Brand, refreshed when its
// token is about to expire, or nil when there is none.
func (a *agent) grant(ctx context.Context, flow *client.DeviceFlow) (*grantFile, error) {
	g := a.grants()[a.iface+" "+a.user]
	if g == nil || time.Until(g.Token.Expires) > time.Minute {
		return g, nil
	}
	ts, err := a.c.Refresh(ctx, flow, a.user, g.Token.RefreshToken)
	var oe *client.OAuthError
	if errors.As(err, &oe) && oe.Code == "invalid_grant" {
		_ = a.dropGrant()
		return nil, errors.New("the delegation for this Brand ended (revoked or expired); run pactagent authorize again")
	}
	if err != nil {
		return nil, err
	}
	g.Token = *ts
	return g, a.saveGrant(g)
}

// authorize asks for scopes, shows the user the Brand's link and waits.
func (a *agent) authorize(ctx context.Context, flow *client.DeviceFlow, scopes []string) (*client.TokenSet, error) {
	fmt.Fprintf(a.out, "Asking %s for permission to:\n", a.card.Organization())
	for _, s := range scopes {
		fmt.Fprintf(a.out, "  - %s (%s)\n", flow.Scopes[s], s)
	}
	d, err := a.c.StartAuthorization(ctx, flow, a.user, scopes)
	if err != nil {
		return nil, err
	}
	link := d.VerificationURIComplete
	if link == "" {
		link = d.VerificationURI
	}
	fmt.Fprintf(a.out, "Open this link to sign in with %s and choose what to allow (code %s, valid %d min):\n  %s\n",
		a.card.Organization(), d.UserCode, max(1, d.ExpiresIn/60), link)
	fmt.Fprint(a.out, "waiting for approval")
	ts, err := a.c.WaitForToken(ctx, flow, a.user, d, func() { fmt.Fprint(a.out, ".") })
	fmt.Fprintln(a.out)
	if errors.Is(err, client.ErrDenied) {
		return nil, errors.New("the user denied the request at the Brand")
	}
	if errors.Is(err, client.ErrExpired) {
		return nil, fmt.Errorf("%w: run pactagent authorize --scope %q again (or send again) for a new link", err, strings.Join(scopes, " "))
	}
	if err != nil {
		return nil, err
	}
	a.showGrant(scopes, ts)
	return ts, a.saveGrant(&grantFile{Token: *ts})
}

// showGrant prints what the token allows (all of it: when consent was
// skipped, it carries an earlier grant that may hold more than was asked)
// and what it does not, and which of the Brand's accounts it is for,
// noting when that differs from the user's previous grant or is another
// user's too.
func (a *agent) showGrant(asked []string, ts *client.TokenSet) {
	var allowed, earlier, not []string
	for _, s := range asked {
		if slices.Contains(ts.Scopes, s) {
			allowed = append(allowed, s)
		} else {
			not = append(not, s)
		}
	}
	for _, s := range ts.Scopes {
		if !slices.Contains(asked, s) {
			earlier = append(earlier, s)
		}
	}
	allowed = append(allowed, earlier...)
	if len(earlier) > 0 {
		fmt.Fprintf(a.out, "Allowed: %s (%s allowed before, with the grant this one continues)\n", strings.Join(allowed, " "), strings.Join(earlier, " "))
	} else {
		fmt.Fprintf(a.out, "Allowed: %s\n", strings.Join(allowed, " "))
	}
	if len(not) > 0 {
		fmt.Fprintf(a.out, "Not allowed: %s\n", strings.Join(not, " "))
	}
	org := a.card.Organization()
	if ts.User == "" {
		fmt.Fprintf(a.out, "The token does not say which %s account signed in; the Brand's account page lists each account's grants.\n", org)
		return
	}
	fmt.Fprintf(a.out, "Signed in as the %s account %s: pactagent acts for it as %s.\n", org, ts.User, a.user)
	for k, g := range a.grants() {
		iface, user, _ := strings.Cut(k, " ")
		switch {
		case iface != a.iface || g.Token.User == "":
		case user == a.user && g.Token.User != ts.User:
			fmt.Fprintf(a.out, "Note: %s's previous grant here was for account %s. If %s is not %s's, revoke this grant on the %s account page and authorize again, signing in with %s's own account; a conversation held as %s needs --new.\n",
				a.user, g.Token.User, ts.User, a.user, org, a.user, g.Token.User)
		case user != a.user && g.Token.User == ts.User:
			fmt.Fprintf(a.out, "Note: %s's grant here is for the same account %s.\n", user, ts.User)
		}
	}
}

// authorizeCmd is pactagent authorize: without scopes it lists what the
// Brand offers; with them it asks for them.
func authorizeCmd(dir, cardURL, user string, scopes []string, out io.Writer) (err error) {
	a, err := connect(dir, cardURL, user, out)
	if err != nil {
		return err
	}
	defer func() { err = a.explain(err, "") }()
	flow, ok := a.card.Delegation()
	if !ok {
		return fmt.Errorf("%s does not offer delegation: talk to its agent without (pactagent send)", a.card.Organization())
	}
	if len(scopes) == 0 {
		ids := make([]string, 0, len(flow.Scopes))
		for id := range flow.Scopes {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		fmt.Fprintf(out, "%s offers these permissions:\n", a.card.Organization())
		for _, id := range ids {
			fmt.Fprintf(out, "  %-20s %s\n", id, flow.Scopes[id])
		}
		_, err := fmt.Fprintln(out, "Ask for some with --scope \"ID ...\"; the user chooses what to allow when signing in.")
		return err
	}
	for _, s := range scopes {
		if _, ok := flow.Scopes[s]; !ok {
			return fmt.Errorf("%s does not offer scope %q (run without --scope to list them)", a.card.Organization(), s)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	_, err = a.authorize(ctx, flow, scopes)
	return err
}

// keepReceipt stores a verified receipt in DIR/receipts/<sha256>.json.
func (a *agent) keepReceipt(r *client.Receipt) error {
	d := filepath.Join(a.dir, "receipts")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	return os.WriteFile(filepath.Join(d, r.SHA256+".json"), b, 0o600)
}

// listReceipts prints the kept receipts, oldest first.
func listReceipts(dir string, out io.Writer) error {
	files, err := filepath.Glob(filepath.Join(dir, "receipts", "*.json"))
	if err != nil {
		return err
	}
	var rs []client.Receipt
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r client.Receipt
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		_, err := fmt.Fprintln(out, "no receipts kept yet")
		return err
	}
	slices.SortFunc(rs, func(a, b client.Receipt) int { return strings.Compare(a.Claims.TS, b.Claims.TS) })
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TIME\tUSER\tGRANT\tACTIONS\tRECEIPT (ledger row id)")
	for _, r := range rs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.Claims.TS, r.Claims.User, r.Claims.GrantID, actionList(r.Claims.Actions), r.SHA256)
	}
	return w.Flush()
}
