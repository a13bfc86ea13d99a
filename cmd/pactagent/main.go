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
//	pactagent init      --dir DIR --issuer URL --audience AUD --provider URL [--provider URL ...]
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
	"github.com/pactledger/pactledger/internal/termtext"
	"github.com/pactledger/pactledger/pact/a2a"
	"github.com/pactledger/pactledger/pact/client"
)

const usage = `usage:
  pactagent init  --dir DIR --issuer URL --audience AUD --provider URL [--provider URL ...]
                                                          create the signing key and settings; AUD is the
                                                          audience the Provider at URL assigned: requests
                                                          signed for it go only to that Provider
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
		report(os.Stderr, err)
		var u usageErr
		if errors.As(err, &u) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// report prints err for the user. It may quote a Brand's answer (an
// error's message, an OAuth error_description): its control characters
// are escaped, shown rather than acted on by the terminal.
func report(w io.Writer, err error) {
	fmt.Fprintln(w, "pactagent:", termtext.EscapeLines(err.Error()))
}

// commands are pactagent's commands, as run dispatches them.
var commands = []string{"init", "jwks", "serve", "send", "authorize", "receipts"}

type usageErr struct{ msg string }

func (e usageErr) Error() string { return e.msg }

// settings are kept in DIR/agent.json; the key in DIR/key.json (0600).
type settings struct {
	Issuer   string `json:"issuer"`
	Audience string `json:"audience"`
	// Providers are the origins of the Provider that assigned Audience:
	// the only places its JWTs are sent (PACT §3.1: one audience per
	// Provider, never derived from a card).
	Providers []string `json:"providers"`
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
	var providers []string
	fs.Func("provider", "", func(v string) error {
		o, err := client.Origin(v)
		if err != nil {
			return err
		}
		providers = append(providers, o)
		return nil
	})
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
		if *issuer == "" || *audience == "" || len(providers) == 0 {
			return usageErr{"init needs --issuer, --audience and --provider (the address of the Provider that assigned the audience)"}
		}
		return initAgent(*dir, settings{Issuer: strings.TrimRight(*issuer, "/"), Audience: *audience, Providers: providers}, out)
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

func initAgent(dir string, st settings, out io.Writer) error {
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
	s, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "agent.json"), s, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(out, "created key %s for issuer %s; register the issuer with jwksUri %s/.well-known/jwks.json at the Provider (%s)\n",
		jwk.KeyID, st.Issuer, st.Issuer, strings.Join(st.Providers, ", "))
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

// signer mints personal-agent JWTs (PACT §3.2): ES256, 120 s lifetime,
// for the audience of s. The client sends them only to s.Providers.
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
	if len(s.Providers) == 0 {
		return nil, fmt.Errorf("%s names no Provider for the audience %s, and pactagent sends its signed requests only to the Provider that assigned it: "+
			"add \"providers\": [\"<the Provider's address, e.g. https://provider.example>\"] to it", filepath.Join(dir, "agent.json"), s.Audience)
	}
	c := &client.Client{Token: tok, Issuer: s.Issuer, Providers: s.Providers, HTTP: &http.Client{Timeout: 30 * time.Second}}
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
	if err := c.AtProvider(iface); err != nil {
		return nil, fmt.Errorf("the card at %s names its interface at %s, not at the Provider this agent is set up for (%s, audience %s): "+
			"pactagent sends its signed requests to no other place, where they could be replayed at that Provider",
			cardURL, termtext.Escape(iface), strings.Join(s.Providers, ", "), s.Audience)
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
	var srv *client.AuthServer
	if delegating && !o.identityOnly {
		if srv, err = a.c.CheckFlow(ctx, flow); err != nil {
			return fmt.Errorf("the card's delegation is not its interface's Provider's, so pactagent does not use it (send --identity-only talks without): %w", err)
		}
		if g, err = a.grant(ctx, srv); err != nil {
			return err
		}
	}
	if o.identityOnly {
		// PACT §3 alone: a step-up is shown, not answered.
		flow = nil
	}
	r, g, err := a.converse(ctx, flow, srv, g, contextID, text)
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
		if receipt, err = a.c.VerifyGrantReceipt(ctx, &g.Server, a.iface, &g.Token, reply); err != nil {
			fmt.Fprintf(out, "%s\n", termtext.EscapeLines(client.ReplyText(reply)))
			return fmt.Errorf("the reply's receipt did not verify, so it is not kept: %w", err)
		}
		if err := a.keepReceipt(receipt); err != nil {
			return err
		}
	}
	if o.asJSON {
		return printJSON(out, map[string]any{"message": reply, "receipt": receipt})
	}
	_, err = fmt.Fprintf(out, "%s\n(context %s)\n", termtext.EscapeLines(client.ReplyText(reply)), termtext.Escape(reply.ContextID))
	if receipt != nil {
		fmt.Fprintf(out, "receipt verified against %s: grant %s, scopes used [%s], actions [%s]; kept as receipts/%s.json\n",
			termtext.Escape(receipt.KeysURL), termtext.Escape(receipt.Claims.GrantID), termtext.Escape(strings.Join(receipt.Claims.ScopesUsed, " ")),
			actionList(receipt.Claims.Actions), receipt.SHA256)
		if receipt.ClockWarning != "" {
			fmt.Fprintf(out, "warning: %s; the receipt is kept all the same\n", termtext.Escape(receipt.ClockWarning))
		}
	}
	return err
}

// actionList is the tools of a receipt's actions, escaped for a terminal.
func actionList(as []a2a.ReceiptAction) string {
	var s []string
	for _, a := range as {
		s = append(s, a.Tool)
	}
	return termtext.Escape(strings.Join(s, " "))
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
// srv is the flow's authorization server (CheckFlow), set with flow.
func (a *agent) converse(ctx context.Context, flow *client.DeviceFlow, srv *client.AuthServer, g *grantFile, contextID, text string) (*client.SendReply, *grantFile, error) {
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
			_ = a.dropGrant(g)
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
			fmt.Fprintln(a.out, termtext.EscapeLines(client.ReplyText(r.Task.Status.Message)))
		}
		// PACT §5.5: repeat §5.3 for the missing scopes, keeping the ones held.
		var want []string
		if g != nil {
			want = slices.Clone(g.Token.Scopes)
		}
		want = append(want, r.Task.Metadata.MissingScopes...)
		slices.Sort(want)
		ng, err := a.authorize(ctx, flow, srv, slices.Compact(want))
		if err != nil {
			return nil, nil, err
		}
		for _, m := range r.Task.Metadata.MissingScopes {
			if !slices.Contains(ng.Token.Scopes, m) {
				return nil, nil, fmt.Errorf("the user did not allow %s, which this needs", termtext.Escape(m))
			}
		}
		g = ng
		contextID = r.Task.ContextID
	}
	return nil, nil, errors.New("the Brand kept asking for more permission")
}

// showStepUp prints a step-up task the agent does not answer itself (PACT
// §3 alone): the Brand's message and its sign-in link. delegating says
// whether sending without --identity-only would ask for the permission.
func (a *agent) showStepUp(t *client.Task, delegating, asJSON bool) error {
	if asJSON {
		return printJSON(a.out, map[string]any{"task": t})
	}
	if t.Status.Message != nil {
		fmt.Fprintln(a.out, termtext.EscapeLines(client.ReplyText(t.Status.Message)))
	}
	scopes := termtext.Escape(strings.Join(t.Metadata.MissingScopes, " "))
	if l := t.Metadata.VerificationURIComplete; l != "" {
		fmt.Fprintf(a.out, "To allow it (%s), sign in with %s at:\n  %s\n", scopes, a.org(), termtext.Escape(l))
	}
	if delegating {
		fmt.Fprintf(a.out, "Or send again without --identity-only: pactagent then asks %s for %s itself and carries on in this conversation.\n", a.org(), scopes)
	}
	_, err := fmt.Fprintf(a.out, "(context %s)\n", termtext.Escape(t.ContextID))
	return err
}

// org is the organization the card names, escaped for a terminal.
func (a *agent) org() string { return termtext.Escape(a.card.Organization()) }

// grantFile is the user's delegation at one Brand, kept in DIR/grants.json
// under grantKey: the token set, and the interface it is for and the
// authorization server that issued it, where alone it is refreshed and
// whose keys alone its receipts are checked against.
type grantFile struct {
	Interface string            `json:"interface"`
	User      string            `json:"user"`
	Server    client.AuthServer `json:"server"`
	Token     client.TokenSet   `json:"token"`
}

// grantKey is where grants.json keeps the user's grant at an interface
// from the authorization server issuer. (A grant kept before grants
// named their server, under "interface user", is not used: nothing says
// which server issued it.)
func grantKey(iface, issuer, user string) string { return iface + " " + issuer + " " + user }

func (a *agent) grantsPath() string { return filepath.Join(a.dir, "grants.json") }

func (a *agent) grants() map[string]*grantFile {
	gs := map[string]*grantFile{}
	if b, err := os.ReadFile(a.grantsPath()); err == nil {
		_ = json.Unmarshal(b, &gs)
	}
	return gs
}

// saveGrant keeps g, the user's grant at the interface from srv, or with
// g nil drops it.
func (a *agent) saveGrant(srv *client.AuthServer, g *grantFile) error {
	gs := a.grants()
	k := grantKey(a.iface, srv.Issuer, a.user)
	if g == nil {
		delete(gs, k)
	} else {
		gs[k] = g
	}
	b, _ := json.MarshalIndent(gs, "", "  ")
	return os.WriteFile(a.grantsPath(), b, 0o600)
}

func (a *agent) dropGrant(g *grantFile) error { return a.saveGrant(&g.Server, nil) }

// grant returns the user's delegation for this Brand from srv, refreshed
// at the token endpoint that issued it when its token is about to
// expire, or nil when there is none.
func (a *agent) grant(ctx context.Context, srv *client.AuthServer) (*grantFile, error) {
	g := a.grants()[grantKey(a.iface, srv.Issuer, a.user)]
	if g == nil || g.Server.Issuer != srv.Issuer || g.Interface != a.iface || time.Until(g.Token.Expires) > time.Minute {
		return g, nil
	}
	ts, err := a.c.Refresh(ctx, &g.Server, a.user, g.Token.RefreshToken)
	var oe *client.OAuthError
	if errors.As(err, &oe) && oe.Code == "invalid_grant" {
		_ = a.dropGrant(g)
		return nil, errors.New("the delegation for this Brand ended (revoked or expired); run pactagent authorize again")
	}
	if err != nil {
		return nil, err
	}
	if err := a.checkToken(&g.Server, ts); err != nil {
		// The refresh spent the refresh token kept (PACT Providers rotate
		// them): the grant has nothing left to refresh with.
		if derr := a.dropGrant(g); derr != nil {
			return nil, fmt.Errorf("%w; dropping the grant: %w", err, derr)
		}
		return nil, fmt.Errorf("the Brand's new token, from refreshing the grant, cannot be used: %w. Its refresh token replaced the one kept, so the grant is dropped: run pactagent authorize again", err)
	}
	g.Token = *ts
	return g, a.saveGrant(&g.Server, g)
}

// checkToken checks that ts, from srv, is for this interface: its iss
// the server and its aud the interface (PACT §5.4).
func (a *agent) checkToken(srv *client.AuthServer, ts *client.TokenSet) error {
	switch {
	case ts.Issuer == "" || ts.Audience == "":
		return fmt.Errorf("the token from %s does not say which server issued it and which one interface it is for (PACT §5.4: a JWT with iss and a single aud)", srv.TokenURL)
	case ts.Issuer != srv.Issuer || ts.Audience != a.iface:
		return fmt.Errorf("the token from %s is for %s, issued by %s: not for the interface %s",
			srv.TokenURL, termtext.Escape(ts.Audience), termtext.Escape(ts.Issuer), a.iface)
	}
	return nil
}

// authorize asks srv for scopes, shows the user the Brand's link, waits,
// and keeps the grant.
func (a *agent) authorize(ctx context.Context, flow *client.DeviceFlow, srv *client.AuthServer, scopes []string) (*grantFile, error) {
	fmt.Fprintf(a.out, "Asking %s for permission to:\n", a.org())
	for _, s := range scopes {
		fmt.Fprintf(a.out, "  - %s (%s)\n", termtext.Escape(flow.Scopes[s]), termtext.Escape(s))
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
		a.org(), termtext.Escape(d.UserCode), max(1, d.ExpiresIn/60), termtext.Escape(link))
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
	if err := a.checkToken(srv, ts); err != nil {
		return nil, fmt.Errorf("%w; it is not kept", err)
	}
	a.showGrant(srv, scopes, ts)
	g := &grantFile{Interface: a.iface, User: a.user, Server: *srv, Token: *ts}
	return g, a.saveGrant(srv, g)
}

// showGrant prints what the token allows (all of it: when consent was
// skipped, it carries an earlier grant that may hold more than was asked)
// and what it does not, and which of the Brand's accounts it is for,
// noting when that differs from the user's previous grant from srv or is
// another user's too.
func (a *agent) showGrant(srv *client.AuthServer, asked []string, ts *client.TokenSet) {
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
	list := func(ss []string) string { return termtext.Escape(strings.Join(ss, " ")) }
	if len(earlier) > 0 {
		fmt.Fprintf(a.out, "Allowed: %s (%s allowed before, with the grant this one continues)\n", list(allowed), list(earlier))
	} else {
		fmt.Fprintf(a.out, "Allowed: %s\n", list(allowed))
	}
	if len(not) > 0 {
		fmt.Fprintf(a.out, "Not allowed: %s\n", list(not))
	}
	org := a.org()
	if ts.User == "" {
		fmt.Fprintf(a.out, "The token does not say which %s account signed in; the Brand's account page lists each account's grants.\n", org)
		return
	}
	account := termtext.Escape(ts.User)
	fmt.Fprintf(a.out, "Signed in as the %s account %s: pactagent acts for it as %s.\n", org, account, a.user)
	for _, g := range a.grants() {
		switch previous := termtext.Escape(g.Token.User); {
		case g.Interface != a.iface || g.Server.Issuer != srv.Issuer || g.Token.User == "":
		case g.User == a.user && g.Token.User != ts.User:
			fmt.Fprintf(a.out, "Note: %s's previous grant here was for account %s. If %s is not %s's, revoke this grant on the %s account page and authorize again, signing in with %s's own account; a conversation held as %s needs --new.\n",
				a.user, previous, account, a.user, org, a.user, previous)
		case g.User != a.user && g.Token.User == ts.User:
			fmt.Fprintf(a.out, "Note: %s's grant here is for the same account %s.\n", g.User, account)
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
		return fmt.Errorf("%s does not offer delegation: talk to its agent without (pactagent send)", a.org())
	}
	if len(scopes) == 0 {
		ids := make([]string, 0, len(flow.Scopes))
		for id := range flow.Scopes {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		fmt.Fprintf(out, "%s offers these permissions:\n", a.org())
		for _, id := range ids {
			fmt.Fprintf(out, "  %-20s %s\n", termtext.Escape(id), termtext.Escape(flow.Scopes[id]))
		}
		_, err := fmt.Fprintln(out, "Ask for some with --scope \"ID ...\"; the user chooses what to allow when signing in.")
		return err
	}
	for _, s := range scopes {
		if _, ok := flow.Scopes[s]; !ok {
			return fmt.Errorf("%s does not offer scope %q (run without --scope to list them)", a.org(), s)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	srv, err := a.c.CheckFlow(ctx, flow)
	if err != nil {
		return fmt.Errorf("the card's delegation is not its interface's Provider's, so pactagent does not ask it for permission: %w", err)
	}
	_, err = a.authorize(ctx, flow, srv, scopes)
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
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", termtext.Escape(r.Claims.TS), termtext.Escape(r.Claims.User), termtext.Escape(r.Claims.GrantID),
			actionList(r.Claims.Actions), termtext.Escape(r.SHA256))
	}
	return w.Flush()
}

// printJSON writes v as a line of JSON, with the characters a terminal
// acts on or hides written as \u escapes (termtext.EscapeJSON): the
// Brand chooses the text of its replies.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, termtext.EscapeJSON(b))
	return err
}
