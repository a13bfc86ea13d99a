package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/pactledger/pactledger/pact/a2a"
	"github.com/pactledger/pactledger/verifier"
)

// The personal agent's side of the Delegated profile (PACT §5): read the
// card's device flow, ask for scopes, wait while the User signs in with
// the Brand (the agent only shows the link), send with the delegation
// token, and verify every receipt against the Brand's published keys.

// DeviceFlow is a Brand's delegation offer from its card (PACT §5.1).
type DeviceFlow struct {
	DeviceAuthorizationURL string
	TokenURL               string
	MetadataURL            string
	// Scopes maps scope ids to the descriptions the User will see.
	Scopes map[string]string
}

// AuthServer is the authorization server of a Brand's delegation, as
// CheckFlow found it: the issuer its RFC 8414 metadata names, checked
// against the metadata's URL (RFC 8414 §3.3), and the token endpoint the
// card and the metadata agree on. A grant keeps the AuthServer that issued
// it: its refresh token goes only to that TokenURL, and its receipts are
// checked against the keys that server's metadata names (PACT §5.6: the
// same keys as the token), whatever card is used later.
type AuthServer struct {
	Issuer      string `json:"issuer"`
	MetadataURL string `json:"metadataUrl"`
	TokenURL    string `json:"tokenUrl"`
}

// metadata is the part of RFC 8414 authorization server metadata the
// agent reads (with RFC 8628 §4's device_authorization_endpoint).
type metadata struct {
	Issuer                      string `json:"issuer"`
	TokenEndpoint               string `json:"token_endpoint"`
	DeviceAuthorizationEndpoint string `json:"device_authorization_endpoint"`
	JWKSURI                     string `json:"jwks_uri"`
}

// wellKnown is the RFC 8414 well-known suffix of authorization servers.
const wellKnown = "/.well-known/oauth-authorization-server"

// metadataFor fetches the metadata at u and checks that its issuer is the
// one u was formed from (RFC 8414 §3.3): issuer + wellKnown, as PACT §5.1
// shows it, or the well-known path inserted before the issuer's path (RFC
// 8414 §3.1).
func (c *Client) metadataFor(ctx context.Context, u string) (*metadata, error) {
	var md metadata
	if err := c.getJSON(ctx, u, 256<<10, &md); err != nil {
		return nil, fmt.Errorf("authorization server metadata: %w", err)
	}
	if md.Issuer == "" || !slices.Contains(metadataURLs(md.Issuer), u) {
		return nil, fmt.Errorf("the authorization server metadata at %s names issuer %q, which is not where it was fetched from (RFC 8414 §3.3)", u, md.Issuer)
	}
	return &md, nil
}

// metadataURLs are the URLs an issuer's metadata may be at.
func metadataURLs(issuer string) []string {
	out := []string{strings.TrimRight(issuer, "/") + wellKnown}
	if p, err := url.Parse(issuer); err == nil && p.Path != "" && p.Path != "/" && p.RawQuery == "" && p.Fragment == "" {
		out = append(out, p.Scheme+"://"+p.Host+wellKnown+strings.TrimRight(p.Path, "/"))
	}
	return out
}

// CheckFlow checks that the card's device flow is the interface's
// Provider's, before anything is asked of it: its device authorization,
// token and metadata URLs at the Provider's origins (Client.Providers),
// its metadata's issuer the one the metadata URL was formed from (RFC
// 8414 §3.3), and the card's endpoints the ones the metadata names. It
// returns the authorization server, whose issuer a grant is kept under.
// A token's iss and aud say the rest (PACT §5.4: the server and the
// interface): see TokenSet.Issuer and Audience.
func (c *Client) CheckFlow(ctx context.Context, f *DeviceFlow) (*AuthServer, error) {
	if f.MetadataURL == "" {
		return nil, errors.New("the card's delegation names no oauth2MetadataUrl (PACT §5.1)")
	}
	for _, u := range []string{f.DeviceAuthorizationURL, f.TokenURL, f.MetadataURL} {
		if err := c.AtProvider(u); err != nil {
			return nil, fmt.Errorf("the card's delegation: %w", err)
		}
	}
	md, err := c.metadataFor(ctx, f.MetadataURL)
	if err != nil {
		return nil, err
	}
	if md.TokenEndpoint != f.TokenURL || md.DeviceAuthorizationEndpoint != f.DeviceAuthorizationURL {
		return nil, fmt.Errorf("the card's tokenUrl %s and deviceAuthorizationUrl %s are not the endpoints its authorization server %s names (%s, %s)",
			f.TokenURL, f.DeviceAuthorizationURL, md.Issuer, md.TokenEndpoint, md.DeviceAuthorizationEndpoint)
	}
	return &AuthServer{Issuer: md.Issuer, MetadataURL: f.MetadataURL, TokenURL: f.TokenURL}, nil
}

// Delegation returns the card's device flow, or false when the Brand does
// not offer delegation.
func (c *Card) Delegation() (*DeviceFlow, bool) {
	for _, s := range c.SecuritySchemes {
		o := s.OAuth2
		if o == nil || o.Flows.DeviceCode == nil || o.Flows.DeviceCode.DeviceAuthorizationURL == "" || o.Flows.DeviceCode.TokenURL == "" {
			continue
		}
		return &DeviceFlow{DeviceAuthorizationURL: o.Flows.DeviceCode.DeviceAuthorizationURL, TokenURL: o.Flows.DeviceCode.TokenURL,
			MetadataURL: o.MetadataURL, Scopes: o.Flows.DeviceCode.Scopes}, true
	}
	return nil, false
}

// securityScheme is the part of a card's security scheme the agent reads.
type securityScheme struct {
	OAuth2 *struct {
		Flows struct {
			DeviceCode *struct {
				DeviceAuthorizationURL string            `json:"deviceAuthorizationUrl"`
				TokenURL               string            `json:"tokenUrl"`
				Scopes                 map[string]string `json:"scopes"`
			} `json:"deviceCode"`
		} `json:"flows"`
		MetadataURL string `json:"oauth2MetadataUrl"`
	} `json:"oauth2SecurityScheme"`
}

// DeviceStart is a started device authorization (RFC 8628 §3.2).
type DeviceStart struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int    `json:"expires_in"`
	Interval                int    `json:"interval"`
}

// TokenSet is a delegation token with its refresh token.
type TokenSet struct {
	AccessToken  string    `json:"accessToken"`
	RefreshToken string    `json:"refreshToken"`
	Scopes       []string  `json:"scopes"` // what the User approved: maybe less than asked
	Expires      time.Time `json:"expires"`
	GrantID      string    `json:"grantId"`
	// User is the Brand's id of the account that signed in and approved:
	// the token's sub (PACT §5.4), read unverified; empty when the token
	// does not say.
	User string `json:"user,omitempty"`
	// Issuer and Audience are the token's iss and aud, read unverified:
	// the authorization server that issued it and the interface it is for
	// (PACT §5.4).
	Issuer   string `json:"issuer,omitempty"`
	Audience string `json:"audience,omitempty"`
}

// OAuthError is an error answer of the Brand's authorization server.
type OAuthError struct {
	Status      int
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

func (e *OAuthError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return e.Code + ": " + e.Description
}

// ErrDenied: the User denied the request at the Brand.
var ErrDenied = errors.New("the user denied the request")

// ErrExpired: the device code expired before the User approved (RFC 8628
// §3.5 expired_token); a new authorization gives a new link.
var ErrExpired = errors.New("the sign-in link expired before the user approved")

// form posts an OAuth form with the personal-agent JWT as the client
// authentication (PACT §5.3) and decodes the JSON answer into out.
func (c *Client) form(ctx context.Context, endpoint, sub string, v url.Values, out any) error {
	if err := c.AtProvider(endpoint); err != nil {
		return err
	}
	v.Set("client_id", c.Issuer)
	res, err := c.do(ctx, c.signedHTTP(), func() (*http.Request, error) {
		tok, err := c.Token(sub)
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(v.Encode()))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return req, nil
	})
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		oe := &OAuthError{Status: res.StatusCode}
		_ = json.Unmarshal(raw, oe)
		return oe
	}
	return json.Unmarshal(raw, out)
}

// StartAuthorization asks the Brand for scopes (PACT §5.3). Only scope ids
// on the card may be asked for.
func (c *Client) StartAuthorization(ctx context.Context, f *DeviceFlow, sub string, scopes []string) (*DeviceStart, error) {
	if len(scopes) == 0 {
		return nil, errors.New("ask for at least one scope")
	}
	for _, s := range scopes {
		if _, ok := f.Scopes[s]; !ok {
			return nil, fmt.Errorf("scope %q is not on the card", s)
		}
	}
	var d DeviceStart
	if err := c.form(ctx, f.DeviceAuthorizationURL, sub, url.Values{"scope": {strings.Join(scopes, " ")}}, &d); err != nil {
		return nil, fmt.Errorf("device authorization: %w", err)
	}
	if d.DeviceCode == "" || d.VerificationURI == "" {
		return nil, errors.New("device authorization: the answer has no device_code or verification_uri")
	}
	if d.Interval <= 0 {
		d.Interval = 5
	}
	return &d, nil
}

// tokenReply is the token endpoint's answer.
type tokenReply struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    int    `json:"expires_in"`
	Scope        string `json:"scope"`
}

func (t tokenReply) set(now time.Time) (*TokenSet, error) {
	if t.AccessToken == "" {
		return nil, errors.New("the token answer has no access_token")
	}
	ts := &TokenSet{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken, Scopes: strings.Fields(t.Scope), Expires: now.Add(seconds(t.ExpiresIn, maxTokenLife))}
	// The token is the Brand's to read and the agent's to carry; the grant
	// id and the Brand user are read, unverified, only to file receipts
	// under the grant and to show the User which account they signed in as.
	var c struct {
		GrantID  string       `json:"grant_id"`
		Subject  string       `json:"sub"`
		Issuer   string       `json:"iss"`
		Audience jwt.Audience `json:"aud"`
	}
	if _, err := verifier.DecodeClaims(t.AccessToken, &c); err == nil {
		ts.GrantID, ts.User, ts.Issuer = c.GrantID, c.Subject, c.Issuer
		if len(c.Audience) == 1 {
			ts.Audience = c.Audience[0]
		}
	}
	return ts, nil
}

// The longest waits and lifetimes the client takes from a Brand's answer
// as they are; longer ones are cut to these. A number of seconds past
// int64 nanoseconds would otherwise wrap to a negative duration: an
// interval of no wait at all (polling without pause), a token already
// expired.
const (
	maxPollInterval = 5 * time.Minute // RFC 8628 §3.2 interval
	maxCodeLife     = 24 * time.Hour  // RFC 8628 §3.2 expires_in
	maxTokenLife    = 24 * time.Hour  // RFC 6749 §5.1 expires_in; PACT §5.4 SHOULD ≤ 1 h
)

// seconds is n seconds, at most limit, and 0 when n is negative; capped
// before it is multiplied, so that it cannot overflow.
func seconds(n int, limit time.Duration) time.Duration {
	if n <= 0 {
		return 0
	}
	if n >= int(limit/time.Second) {
		return limit
	}
	return time.Duration(n) * time.Second
}

// WaitForToken polls the token endpoint at the interval the Brand asks
// (slowing down when told) until the User approves, denies (ErrDenied) or
// the code expires. waiting, when set, is called before each poll.
func (c *Client) WaitForToken(ctx context.Context, f *DeviceFlow, sub string, d *DeviceStart, waiting func()) (*TokenSet, error) {
	interval := seconds(d.Interval, maxPollInterval)
	if interval <= 0 {
		interval = 5 * time.Second // RFC 8628 §3.2: the default
	}
	deadline := time.Now().Add(seconds(d.ExpiresIn, maxCodeLife))
	for {
		if err := c.sleep(ctx, interval); err != nil {
			return nil, err
		}
		if waiting != nil {
			waiting()
		}
		var t tokenReply
		err := c.form(ctx, f.TokenURL, sub, url.Values{"grant_type": {deviceGrant}, "device_code": {d.DeviceCode}}, &t)
		var oe *OAuthError
		switch {
		case err == nil:
			return t.set(time.Now())
		case errors.As(err, &oe) && oe.Code == "authorization_pending":
		case errors.As(err, &oe) && oe.Code == "slow_down":
			interval += 5 * time.Second
		case errors.As(err, &oe) && oe.Code == "access_denied":
			return nil, ErrDenied
		case errors.As(err, &oe) && oe.Code == "expired_token":
			return nil, ErrExpired
		default:
			return nil, fmt.Errorf("token: %w", err)
		}
		if d.ExpiresIn > 0 && time.Now().After(deadline) {
			return nil, ErrExpired
		}
	}
}

// Refresh trades a refresh token for a new token set at the token
// endpoint of s, the authorization server that issued the grant (the old
// refresh token is then spent: PACT Providers rotate them).
func (c *Client) Refresh(ctx context.Context, s *AuthServer, sub, refreshToken string) (*TokenSet, error) {
	var t tokenReply
	if err := c.form(ctx, s.TokenURL, sub, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}}, &t); err != nil {
		return nil, fmt.Errorf("refresh: %w", err)
	}
	return t.set(time.Now())
}

// Task is a task reply: with the Delegated profile, a step-up asking for
// more scopes (PACT §5.5).
type Task struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State   string       `json:"state"`
		Message *a2a.Message `json:"message"`
	} `json:"status"`
	Metadata struct {
		MissingScopes           []string `json:"pact.missingScopes"`
		VerificationURIComplete string   `json:"pact.verificationUriComplete"`
	} `json:"metadata"`
}

// SendReply is the answer to message:send: a message or a task.
type SendReply struct {
	Message *a2a.Message
	Task    *Task
}

// ContextID is the conversation the reply belongs to.
func (r *SendReply) ContextID() string {
	if r.Message != nil {
		return r.Message.ContextID
	}
	return r.Task.ContextID
}

// SendDelegated sends text with a delegation token (PACT §5.5) and returns
// the message, or the step-up task.
func (c *Client) SendDelegated(ctx context.Context, iface, sub, contextID, messageID, text, delegation string) (*SendReply, error) {
	raw, err := c.send(ctx, iface, sub, contextID, messageID, text, delegation)
	if err != nil {
		return nil, err
	}
	return decodeReply(raw)
}

// decodeReply decodes the answer to message:send: a message or a task.
func decodeReply(raw []byte) (*SendReply, error) {
	var out struct {
		Message *a2a.Message `json:"message"`
		Task    *Task        `json:"task"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || (out.Message == nil && out.Task == nil) {
		return nil, fmt.Errorf("reply is neither a message nor a task: %.200s", raw)
	}
	return &SendReply{Message: out.Message, Task: out.Task}, nil
}

// Receipt is a verified receipt (PACT §5.6).
type Receipt struct {
	JWS    string            `json:"jws"`
	Claims a2a.ReceiptClaims `json:"claims"`
	// SHA256 is the hex SHA-256 of the JWS: the ledger's row id.
	SHA256 string `json:"sha256"`
	// KeysURL is the jwks_uri the receipt was verified against.
	KeysURL    string    `json:"keysUrl"`
	VerifiedAt time.Time `json:"verifiedAt"`
	// ClockWarning, when set, says that the receipt's ts was far from this
	// machine's clock when it was checked: more than ReceiptSkew ahead or
	// ReceiptMaxAge behind. One of the two clocks is wrong, or the receipt
	// is an older one of the grant's. The receipt is verified all the
	// same: what binds it to the grant held (PACT §5.6), and the action
	// it records has happened at the Brand.
	ClockWarning string `json:"clockWarning,omitempty"`
}

// receiptMeta is metadata["pact.receipt"].
type receiptMeta struct {
	Receipt *struct {
		JWS    string          `json:"jws"`
		Claims json.RawMessage `json:"claims"`
	} `json:"pact.receipt"`
}

// ErrNoReceipt: a reply under a delegation token carried no receipt.
var ErrNoReceipt = errors.New("the reply carries no receipt")

// ReceiptSkew is the clock skew allowed between a receipt's ts and its
// delegation token's iat and exp (as on PACT §3.2's times).
const ReceiptSkew = 30 * time.Second

// ReceiptMaxAge is how old a receipt's ts may be, by this machine's
// clock, before VerifyGrantReceipt notes it (Receipt.ClockWarning), the
// reply having just come: the turn and the way back take less.
const ReceiptMaxAge = 5 * time.Minute

// VerifyGrantReceipt checks a reply's receipt (PACT §5.6) to a message
// sent with the delegation token of ts, issued by s: signed with the same
// keys as the token, those at the jwks_uri of s's metadata, whose issuer
// is the one its URL was formed from (RFC 8414 §3.3) and the token's iss;
// the token verified by those keys too, with aud the interface, at the
// receipt's ts; claims shown equal to the signed ones; this agent as pa
// and the interface as brand; the token's grant_id and sub as grantId and
// user; scopesUsed among the token's scope; ts within the token's life
// (ReceiptSkew either side). A ts far from this machine's clock does not
// make it fail: it is noted in the receipt's ClockWarning. Keys are
// fetched again once when the receipt or the token names a kid they lack
// (the Brand rotated them).
func (c *Client) VerifyGrantReceipt(ctx context.Context, s *AuthServer, iface string, ts *TokenSet, m *a2a.Message) (*Receipt, error) {
	if s.Issuer == "" || ts.AccessToken == "" {
		return nil, errors.New("receipt: a receipt is checked against its grant: the authorization server's issuer and the delegation token it was sent with")
	}
	r, keys, err := c.verifyReceipt(ctx, s, iface, ts.AccessToken, m)
	if err != nil {
		return nil, err
	}
	claims := r.Claims
	at, err := time.Parse(time.RFC3339, claims.TS)
	if err != nil {
		return nil, fmt.Errorf("receipt: ts %q is not an RFC 3339 time", claims.TS)
	}
	// PACT §5.6: the same keys as the token. The token, checked as it was
	// when the receipt was signed, says what the receipt may name.
	var tok struct {
		verifier.Claims
		Scope   string `json:"scope"`
		GrantID string `json:"grant_id"`
	}
	if _, err := verifier.VerifyCompact(ts.AccessToken, keys, &tok, verifier.Expected{Issuer: s.Issuer, Audience: iface, Time: at, Leeway: ReceiptSkew}); err != nil {
		return nil, fmt.Errorf("receipt: the delegation token it was sent with, against %s and at the receipt's time %s: %w", keys.Snapshot.URI, claims.TS, err)
	}
	switch {
	case tok.GrantID == "" || claims.GrantID != tok.GrantID:
		return nil, fmt.Errorf("receipt: names grant %q, not the token's %q", claims.GrantID, tok.GrantID)
	case claims.User != tok.Subject:
		return nil, fmt.Errorf("receipt: names user %q, not the token's %q", claims.User, tok.Subject)
	}
	granted := strings.Fields(tok.Scope)
	for _, sc := range claims.ScopesUsed {
		if !slices.Contains(granted, sc) {
			return nil, fmt.Errorf("receipt: names scope %q, which the token does not grant", sc)
		}
	}
	r.ClockWarning = clockWarning(at, c.now())
	return r, nil
}

// clockWarning says how far a receipt's time at is from now, this
// machine's clock, when it is more than ReceiptSkew ahead or
// ReceiptMaxAge behind; "" otherwise.
func clockWarning(at, now time.Time) string {
	now = now.UTC().Truncate(time.Second)
	switch d := at.Sub(now); {
	case d > ReceiptSkew:
		return fmt.Sprintf("the receipt's time %s is %s ahead of this machine's clock (%s): this clock may be slow",
			at.UTC().Format(time.RFC3339), d, now.Format(time.RFC3339))
	case -d > ReceiptMaxAge:
		return fmt.Sprintf("the receipt's time %s is %s behind this machine's clock (%s): this clock may be fast, or the receipt is an older one of this grant",
			at.UTC().Format(time.RFC3339), -d, now.Format(time.RFC3339))
	}
	return ""
}

// verifyReceipt checks the receipt in m against the keys of s, with the
// token naming a kid of them too, and pa and brand; it returns the
// receipt and the keys.
func (c *Client) verifyReceipt(ctx context.Context, s *AuthServer, iface, token string, m *a2a.Message) (*Receipt, *verifier.KeySet, error) {
	var meta receiptMeta
	if len(m.Metadata) == 0 || json.Unmarshal(m.Metadata, &meta) != nil || meta.Receipt == nil || meta.Receipt.JWS == "" {
		return nil, nil, ErrNoReceipt
	}
	jws := meta.Receipt.JWS
	keys, err := c.brandKeys(ctx, s, false)
	if err != nil {
		return nil, nil, err
	}
	signed, err := verifier.VerifyCompact(jws, keys, nil, verifier.Expected{})
	_, terr := verifier.VerifyCompact(token, keys, nil, verifier.Expected{})
	if errors.Is(err, verifier.ErrUnknownKid) || errors.Is(terr, verifier.ErrUnknownKid) {
		if keys, err = c.brandKeys(ctx, s, true); err != nil {
			return nil, nil, err
		}
		signed, err = verifier.VerifyCompact(jws, keys, nil, verifier.Expected{})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("receipt: against %s: %w", keys.Snapshot.URI, err)
	}
	var fromJWS, shown any
	if json.Unmarshal(signed.Payload, &fromJWS) != nil || json.Unmarshal(meta.Receipt.Claims, &shown) != nil || !reflect.DeepEqual(fromJWS, shown) {
		return nil, nil, errors.New("receipt: the claims shown differ from the signed ones")
	}
	var claims a2a.ReceiptClaims
	if err := json.Unmarshal(signed.Payload, &claims); err != nil {
		return nil, nil, fmt.Errorf("receipt claims: %w", err)
	}
	if claims.PA != c.Issuer || claims.Brand != iface || claims.GrantID == "" {
		return nil, nil, fmt.Errorf("receipt: names pa %q and brand %q, not this agent and %s", claims.PA, claims.Brand, iface)
	}
	sum := sha256.Sum256([]byte(jws))
	return &Receipt{JWS: jws, Claims: claims, SHA256: hex.EncodeToString(sum[:]), KeysURL: keys.Snapshot.URI, VerifiedAt: c.now().UTC()}, keys, nil
}

// brandKeys fetches the metadata of s, checks its issuer (RFC 8414 §3.3,
// and the issuer s was found with when it is set), and the keys at its jwks_uri, once
// per client, and again when refresh is set.
func (c *Client) brandKeys(ctx context.Context, s *AuthServer, refresh bool) (*verifier.KeySet, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys == nil {
		c.keys = map[AuthServer]*verifier.KeySet{}
	}
	if ks, ok := c.keys[*s]; ok && !refresh {
		return ks, nil
	}
	md, err := c.metadataFor(ctx, s.MetadataURL)
	if err != nil {
		return nil, err
	}
	if s.Issuer != "" && md.Issuer != s.Issuer {
		return nil, fmt.Errorf("the authorization server metadata at %s names issuer %q, not %q, which issued the grant", s.MetadataURL, md.Issuer, s.Issuer)
	}
	if md.JWKSURI == "" {
		return nil, errors.New("the metadata names no jwks_uri")
	}
	var raw json.RawMessage
	if err := c.getJSON(ctx, md.JWKSURI, 256<<10, &raw); err != nil {
		return nil, fmt.Errorf("brand keys: %w", err)
	}
	ks, err := verifier.ParseKeySet(verifier.NewSnapshot(md.JWKSURI, time.Now(), raw))
	if err != nil {
		return nil, fmt.Errorf("brand keys at %s: %w", md.JWKSURI, err)
	}
	c.keys[*s] = ks
	return ks, nil
}

// clientState is the Client's cache of Brand keys, by authorization server.
type clientState struct {
	mu   sync.Mutex
	keys map[AuthServer]*verifier.KeySet
}
