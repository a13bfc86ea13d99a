// Command pactagent is a reference personal agent for PACT 1.0 (Identity
// profile): it keeps its own ES256 signing key, serves its JWKS, fetches a
// Brand's Agent Card, picks the HTTP+JSON 1.0 interface, and sends messages
// with a fresh personal-agent JWT (120 s) each time, continuing the
// conversation per (card, user).
//
//	pactagent init  --dir DIR --issuer URL --audience AUD
//	pactagent jwks  --dir DIR
//	pactagent serve --dir DIR --listen ADDR
//	pactagent send  --dir DIR --card URL --user SUB [--new] [--json] TEXT
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
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/pact"
)

const usage = `usage:
  pactagent init  --dir DIR --issuer URL --audience AUD   create the signing key and settings
  pactagent jwks  --dir DIR                               print the public JWKS (for registration)
  pactagent serve --dir DIR [--listen ADDR]               serve the JWKS at /.well-known/jwks.json
  pactagent send  --dir DIR --card URL --user SUB [--new] [--json] TEXT
                                                          send TEXT as user SUB, continuing its conversation
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
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", "", "")
	issuer := fs.String("issuer", "", "")
	audience := fs.String("audience", "", "")
	listen := fs.String("listen", "127.0.0.1:8099", "")
	card := fs.String("card", "", "")
	user := fs.String("user", "", "")
	fresh := fs.Bool("new", false, "")
	asJSON := fs.Bool("json", false, "")
	if err := fs.Parse(args[1:]); err != nil {
		return usageErr{err.Error()}
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
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		srv := &http.Server{Addr: *listen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go func() { <-ctx.Done(); _ = srv.Close() }()
		fmt.Fprintf(out, "serving the JWKS at http://%s/.well-known/jwks.json\n", *listen)
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	case "send":
		if *card == "" || *user == "" || fs.NArg() == 0 {
			return usageErr{"send needs --card, --user and the text"}
		}
		return send(*dir, *card, *user, strings.Join(fs.Args(), " "), *fresh, *asJSON, out)
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

// send sends one message, continuing the user's conversation with the
// card's Brand unless fresh, and remembers the context in DIR/contexts.json.
func send(dir, cardURL, user, text string, fresh, asJSON bool, out io.Writer) error {
	k, s, err := load(dir)
	if err != nil {
		return err
	}
	tok, err := signer(k, s)
	if err != nil {
		return err
	}
	c := &pact.Client{Token: tok}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	card, err := c.FetchCard(ctx, cardURL)
	if err != nil {
		return err
	}
	iface, err := card.Interface()
	if err != nil {
		return err
	}
	ctxPath := filepath.Join(dir, "contexts.json")
	contexts := map[string]string{}
	if b, err := os.ReadFile(ctxPath); err == nil {
		_ = json.Unmarshal(b, &contexts)
	}
	key := iface + " " + user
	contextID := contexts[key]
	if fresh {
		contextID = ""
	}
	reply, err := c.Send(ctx, iface, user, contextID, "", text)
	var se *pact.SendError
	if errors.As(err, &se) && se.Reason == pact.ReasonUnsupported && contextID != "" {
		// The Brand closed the conversation: start a new one.
		reply, err = c.Send(ctx, iface, user, "", "", text)
	}
	if err != nil {
		return err
	}
	contexts[key] = reply.ContextID
	b, _ := json.MarshalIndent(contexts, "", "  ")
	if err := os.WriteFile(ctxPath, b, 0o600); err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(out).Encode(map[string]any{"message": reply})
	}
	_, err = fmt.Fprintf(out, "%s\n(context %s)\n", pact.ReplyText(reply), reply.ContextID)
	return err
}
