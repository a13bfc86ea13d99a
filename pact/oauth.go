package pact

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/verifier"
)

// The OAuth side of the Delegated profile (PACT §5.1, §5.3, §5.4): RFC 8414
// metadata, the JWKS, device authorization (RFC 8628) and the token
// endpoint with rotating refresh tokens. The personal agent's §3 JWT is the
// client authentication on every call.

var (
	bDevices  = []byte("device_codes")
	bUserCode = []byte("user_codes")
	bGrants   = []byte("grants")
	bRefresh  = []byte("refresh_tokens")
)

// Lifetimes of the Delegated profile.
const (
	deviceCodeTTL  = 10 * time.Minute
	pollInterval   = 5 * time.Second
	accessTokenTTL = time.Hour // PACT §5.4: SHOULD be at most 1 h
	grantTTL       = 90 * 24 * time.Hour
	deviceGrant    = "urn:ietf:params:oauth:grant-type:device_code"
)

// deviceAuth is one pending device authorization.
type deviceAuth struct {
	Brand     string    `json:"brand"`
	Client    string    `json:"client"` // personal agent issuer
	Sub       string    `json:"sub"`    // personal agent's sub of the requester
	Scopes    []string  `json:"scopes"`
	UserCode  string    `json:"userCode"`
	Expires   time.Time `json:"expires"`
	Interval  int       `json:"interval"`
	LastPoll  time.Time `json:"lastPoll,omitzero"`
	Status    string    `json:"status"` // pending, approved, denied, redeemed
	User      string    `json:"user,omitempty"`
	Granted   []string  `json:"granted,omitempty"`
	DecidedAt time.Time `json:"decidedAt,omitzero"`
	// GrantID is the User's existing grant that already covers the
	// request, when consent was skipped for it (PACT §5.3).
	GrantID string `json:"grantId,omitempty"`
	// RequestJWT is the personal agent's JWT of the request, kept as
	// evidence for a refusal should the User deny.
	RequestJWT string `json:"requestJwt,omitempty"`
}

// grant is what a User approved for a personal agent at a Brand.
type grant struct {
	ID      string    `json:"id"`
	Brand   string    `json:"brand"`
	Client  string    `json:"client"`
	User    string    `json:"user"`
	Scopes  []string  `json:"scopes"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	Revoked time.Time `json:"revoked,omitzero"`
}

// refreshToken is one refresh token of a grant's rotation chain.
type refreshToken struct {
	Grant   string    `json:"grant"`
	Used    bool      `json:"used,omitempty"`
	Expires time.Time `json:"expires"`
}

func hashToken(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func randomToken(prefix string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// userCodeAlphabet has no vowels or look-alike characters (RFC 8628 §6.1).
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

func newUserCode() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	out := make([]byte, 0, 9)
	for i, c := range b {
		if i == 4 {
			out = append(out, '-')
		}
		out = append(out, userCodeAlphabet[int(c)%len(userCodeAlphabet)])
	}
	return string(out)
}

// oauthError is an RFC 6749 §5.2 error.
func oauthError(w http.ResponseWriter, code int, kind, desc string) {
	b, _ := json.Marshal(map[string]string{"error": kind, "error_description": desc})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func oauthJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// issuer is a delegating brand's authorization server issuer.
func (p *Provider) issuer(b *Brand) string { return p.InterfaceURL(b.ID) + "/oauth" }

// metadataURL is where its RFC 8414 metadata is.
func (p *Provider) metadataURL(b *Brand) string {
	return p.issuer(b) + "/.well-known/oauth-authorization-server"
}

// LoginURL is the Brand's login page the verification URI points to: the
// Brand's own, or the built-in demo login.
func (p *Provider) LoginURL(b *Brand) string {
	if b.Login != nil {
		return b.Login.URL
	}
	return p.demoBase(b) + "/login"
}

// ReturnURL is where the Brand's login POSTs its assertion: the Provider's
// consent page.
func (p *Provider) ReturnURL(b *Brand) string { return p.issuer(b) + "/consent" }

// verificationURI is the link the personal agent shows the User: the
// Brand's login, told where to return the User (PACT §5.3).
func (p *Provider) verificationURI(b *Brand, userCode string) string {
	u := p.LoginURL(b)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	u += sep + "return_to=" + url.QueryEscape(p.ReturnURL(b))
	if userCode != "" {
		u += "&user_code=" + url.QueryEscape(userCode)
	}
	return u
}

func (p *Provider) metadata(w http.ResponseWriter, b *Brand) {
	scopes := make([]string, len(b.Scopes))
	for i, s := range b.Scopes {
		scopes[i] = s.ID
	}
	oauthJSON(w, map[string]any{
		"issuer":                                p.issuer(b),
		"device_authorization_endpoint":         p.issuer(b) + "/device_authorization",
		"token_endpoint":                        p.issuer(b) + "/token",
		"jwks_uri":                              p.issuer(b) + "/jwks.json",
		"scopes_supported":                      scopes,
		"grant_types_supported":                 []string{deviceGrant, "refresh_token"},
		"token_endpoint_auth_methods_supported": []string{"private_key_jwt"},
		"response_types_supported":              []string{},
	})
}

func (p *Provider) jwks(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(p.key.jwks)
}

// clientForm reads the form and checks client_id against the personal
// agent's JWT (PACT §5.3: client_id is its issuer). It writes the error.
func (p *Provider) clientForm(w http.ResponseWriter, r *http.Request, who *verifier.RequestClaims) (url.Values, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body is not a form")
		return nil, false
	}
	if c := r.PostForm.Get("client_id"); c != who.Iss {
		w.Header().Set("WWW-Authenticate", `Bearer realm="a2a"`)
		oauthError(w, http.StatusUnauthorized, "invalid_client", "client_id must be the personal agent's issuer")
		return nil, false
	}
	return r.PostForm, true
}

// deviceAuthorization is RFC 8628 §3.1–3.2.
func (p *Provider) deviceAuthorization(w http.ResponseWriter, r *http.Request, rt route, who *verifier.RequestClaims) {
	form, ok := p.clientForm(w, r, who)
	if !ok {
		return
	}
	b := rt.brand
	scopes, serr := cardScopes(b, strings.Fields(form.Get("scope")))
	if serr != nil {
		oauthError(w, http.StatusBadRequest, serr.kind, serr.desc)
		return
	}
	paJWT, _ := bearerToken(r.Header.Get("Authorization"))
	deviceCode, userCode, err := p.newDeviceAuth(b, who.Iss, who.Sub, paJWT, scopes, p.cfg.Now().UTC())
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", "could not store the authorization")
		return
	}
	oauthJSON(w, map[string]any{
		"device_code":               deviceCode,
		"user_code":                 userCode,
		"verification_uri":          p.verificationURI(b, ""),
		"verification_uri_complete": p.verificationURI(b, userCode),
		"expires_in":                int(deviceCodeTTL / time.Second),
		"interval":                  int(p.cfg.PollInterval / time.Second),
	})
}

// cardScopes checks the scope ids of a request against the Brand's card
// (PACT §5.2, §5.3): at least one, each an id on the card, else an OAuth
// invalid_scope error. It returns them without repeats, in order. The
// device authorization endpoint and the step-up of a turn (§5.5) both
// check with it.
func cardScopes(b *Brand, requested []string) ([]string, *errOAuth) {
	if len(requested) == 0 {
		return nil, &errOAuth{"invalid_scope", "ask for at least one of the scopes on the card"}
	}
	for _, s := range requested {
		if b.Scope(s) == nil {
			return nil, &errOAuth{"invalid_scope", "unknown scope " + s}
		}
	}
	return dedupe(requested), nil
}

// newDeviceAuth stores a pending device authorization for client (a
// personal agent) and its sub, and returns its device and user codes.
func (p *Provider) newDeviceAuth(b *Brand, client, sub, paJWT string, scopes []string, now time.Time) (string, string, error) {
	deviceCode := randomToken("dc_")
	d := deviceAuth{Brand: b.ID, Client: client, Sub: sub, RequestJWT: paJWT, Scopes: scopes, Expires: now.Add(deviceCodeTTL), Interval: int(p.cfg.PollInterval / time.Second), Status: "pending"}
	err := p.store.db.Update(func(tx *bolt.Tx) error {
		for range 5 { // a user code collision is unlikely; retry a few times
			d.UserCode = newUserCode()
			if tx.Bucket(bUserCode).Get([]byte(d.UserCode)) == nil {
				break
			}
		}
		v, err := json.Marshal(d)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bDevices).Put(hashToken(deviceCode), v); err != nil {
			return err
		}
		return tx.Bucket(bUserCode).Put([]byte(d.UserCode), hashToken(deviceCode))
	})
	return deviceCode, d.UserCode, err
}

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// token is the token endpoint: the device code grant (RFC 8628 §3.4–3.5)
// and refresh with rotation and reuse detection.
func (p *Provider) token(w http.ResponseWriter, r *http.Request, rt route, who *verifier.RequestClaims) {
	form, ok := p.clientForm(w, r, who)
	if !ok {
		return
	}
	switch form.Get("grant_type") {
	case deviceGrant:
		p.redeemDevice(w, rt.brand, who, form.Get("device_code"))
	case "refresh_token":
		p.refresh(w, rt.brand, who, form.Get("refresh_token"))
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "use the device code grant or refresh_token")
	}
}

// errOAuth carries an OAuth error out of a transaction.
type errOAuth struct{ kind, desc string }

func (e *errOAuth) Error() string { return e.kind + ": " + e.desc }

func writeOAuthErr(w http.ResponseWriter, err error) {
	var oe *errOAuth
	if errors.As(err, &oe) {
		oauthError(w, http.StatusBadRequest, oe.kind, oe.desc)
		return
	}
	oauthError(w, http.StatusInternalServerError, "server_error", "internal error")
}

func (p *Provider) redeemDevice(w http.ResponseWriter, b *Brand, who *verifier.RequestClaims, code string) {
	now := p.cfg.Now().UTC()
	var g *grant
	var pollErr *errOAuth // an answer that still commits the poll's bookkeeping
	err := p.store.db.Update(func(tx *bolt.Tx) error {
		v := tx.Bucket(bDevices).Get(hashToken(code))
		if v == nil {
			return &errOAuth{"invalid_grant", "unknown device_code"}
		}
		var d deviceAuth
		if err := json.Unmarshal(v, &d); err != nil {
			return err
		}
		if d.Brand != b.ID || d.Client != who.Iss {
			return &errOAuth{"invalid_grant", "the device_code was issued to another client or brand"}
		}
		if now.After(d.Expires) {
			return &errOAuth{"expired_token", "the device_code has expired; start again"}
		}
		save := func() error {
			v, err := json.Marshal(d)
			if err != nil {
				return err
			}
			return tx.Bucket(bDevices).Put(hashToken(code), v)
		}
		switch d.Status {
		case "redeemed":
			return &errOAuth{"invalid_grant", "the device_code was already redeemed"}
		case "denied":
			return &errOAuth{"access_denied", "the user denied the request"}
		case "pending":
			tooSoon := !d.LastPoll.IsZero() && now.Sub(d.LastPoll) < time.Duration(d.Interval)*time.Second
			d.LastPoll = now
			pollErr = &errOAuth{"authorization_pending", "the user has not approved yet"}
			if tooSoon {
				d.Interval += 5 // RFC 8628 §3.5
				pollErr = &errOAuth{"slow_down", fmt.Sprintf("poll at most every %d seconds", d.Interval)}
			}
			return save()
		}
		// Approved: redeem once.
		d.Status = "redeemed"
		if err := save(); err != nil {
			return err
		}
		if d.GrantID != "" {
			// Consent was skipped: the User's existing grant covers it.
			var eg grant
			if gv := tx.Bucket(bGrants).Get([]byte(d.GrantID)); gv == nil || json.Unmarshal(gv, &eg) != nil {
				return &errOAuth{"invalid_grant", "the grant is gone"}
			}
			if !eg.Revoked.IsZero() || now.After(eg.Expires) {
				return &errOAuth{"invalid_grant", "the grant was revoked or has expired; start again"}
			}
			g = &eg
			return nil
		}
		g = &grant{ID: "a2agrant_" + randomToken("")[:26], Brand: b.ID, Client: d.Client, User: d.User, Scopes: d.Granted, Created: now, Expires: now.Add(grantTTL)}
		gv, err := json.Marshal(g)
		if err != nil {
			return err
		}
		return tx.Bucket(bGrants).Put([]byte(g.ID), gv)
	})
	if err == nil && pollErr != nil {
		err = pollErr
	}
	if err != nil {
		if !errors.As(err, new(*errOAuth)) {
			p.cfg.Logger.Error("device code redemption failed", "error", err.Error())
		}
		writeOAuthErr(w, err)
		return
	}
	p.issueTokens(w, b, g)
}

func (p *Provider) refresh(w http.ResponseWriter, b *Brand, who *verifier.RequestClaims, rt string) {
	now := p.cfg.Now().UTC()
	var g grant
	var reuse *errOAuth // reuse revokes the chain, and that must commit
	err := p.store.db.Update(func(tx *bolt.Tx) error {
		v := tx.Bucket(bRefresh).Get(hashToken(rt))
		if v == nil {
			return &errOAuth{"invalid_grant", "unknown refresh_token"}
		}
		var t refreshToken
		if err := json.Unmarshal(v, &t); err != nil {
			return err
		}
		gv := tx.Bucket(bGrants).Get([]byte(t.Grant))
		if gv == nil {
			return &errOAuth{"invalid_grant", "unknown grant"}
		}
		if err := json.Unmarshal(gv, &g); err != nil {
			return err
		}
		switch {
		case g.Brand != b.ID || g.Client != who.Iss:
			return &errOAuth{"invalid_grant", "the refresh_token was issued to another client or brand"}
		case t.Used:
			// Reuse of a rotated token: revoke the grant's whole chain.
			g.Revoked = now
			gv, err := json.Marshal(g)
			if err != nil {
				return err
			}
			reuse = &errOAuth{"invalid_grant", "the refresh_token was already used; the grant's refresh tokens are revoked"}
			if err := tx.Bucket(bGrants).Put([]byte(g.ID), gv); err != nil {
				return err
			}
			return enqueue(tx, LedgerItem{Revocation: &LedgerRevocation{GrantID: g.ID, RevokedAt: now, Note: "a used refresh token was presented again; the Provider revoked the grant"}})
		case !g.Revoked.IsZero():
			return &errOAuth{"invalid_grant", "the grant is revoked"}
		case now.After(t.Expires) || now.After(g.Expires):
			return &errOAuth{"invalid_grant", "the refresh_token has expired"}
		}
		t.Used = true
		tv, err := json.Marshal(t)
		if err != nil {
			return err
		}
		return tx.Bucket(bRefresh).Put(hashToken(rt), tv)
	})
	if err == nil && reuse != nil {
		p.wakePipeline()
		err = reuse
	}
	if err != nil {
		writeOAuthErr(w, err)
		return
	}
	p.issueTokens(w, b, &g)
}

// DelegationClaims are the claims of a delegation token (PACT §5.4).
type DelegationClaims struct {
	Iss      string `json:"iss"`
	Aud      string `json:"aud"`
	Sub      string `json:"sub"`
	ClientID string `json:"client_id"`
	Scope    string `json:"scope"`
	GrantID  string `json:"grant_id"`
	Iat      int64  `json:"iat"`
	Exp      int64  `json:"exp"`
	Jti      string `json:"jti"`
}

// issueTokens signs a delegation token and stores a new refresh token.
func (p *Provider) issueTokens(w http.ResponseWriter, b *Brand, g *grant) {
	now := p.cfg.Now().UTC()
	jti := make([]byte, 8)
	_, _ = rand.Read(jti)
	at, err := p.key.sign(DelegationClaims{Iss: p.issuer(b), Aud: p.InterfaceURL(b.ID), Sub: g.User, ClientID: g.Client, Scope: strings.Join(g.Scopes, " "),
		GrantID: g.ID, Iat: now.Unix(), Exp: now.Add(accessTokenTTL).Unix(), Jti: hex.EncodeToString(jti)})
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", "could not sign the token")
		return
	}
	rt := randomToken("rt_")
	err = p.store.db.Update(func(tx *bolt.Tx) error {
		v, err := json.Marshal(refreshToken{Grant: g.ID, Expires: g.Expires})
		if err != nil {
			return err
		}
		return tx.Bucket(bRefresh).Put(hashToken(rt), v)
	})
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", "could not store the refresh token")
		return
	}
	oauthJSON(w, map[string]any{"token_type": "Bearer", "access_token": at, "refresh_token": rt,
		"expires_in": int(accessTokenTTL / time.Second), "scope": strings.Join(g.Scopes, " ")})
}

// errDecision is a decision the User cannot make: the code is unknown,
// expired or already decided. Its text is shown to the User.
type errDecision struct{ msg string }

func (e *errDecision) Error() string { return e.msg }

// decision is the User's answer on a device authorization.
type decision struct {
	UserCode string
	User     string // the Brand user, authenticated by the Brand's login
	Approve  bool
	Scopes   []string // kept of those requested, when approving
	GrantID  string   // an existing grant that covers the request (consent skipped)
}

// decide records the User's decision on a device authorization, found by
// its user code: approve with the scopes they kept (a subset of those
// requested), or deny, which is also queued for the ledger as a refusal.
// The consent page calls it.
func (p *Provider) decide(dc decision) error {
	var refused bool
	err := p.store.db.Update(func(tx *bolt.Tx) error {
		var err error
		refused, err = decideTx(tx, dc, p.cfg.Now().UTC())
		return err
	})
	if err == nil && refused {
		p.wakePipeline()
	}
	return err
}

// decideTx is decide inside tx; it reports whether a refusal was queued.
func decideTx(tx *bolt.Tx, dc decision, now time.Time) (bool, error) {
	d, h, err := pendingDevice(tx, dc.UserCode, now)
	if err != nil {
		return false, err
	}
	for _, s := range dc.Scopes {
		if !slices.Contains(d.Scopes, s) {
			return false, &errDecision{fmt.Sprintf("scope %s was not requested", s)}
		}
	}
	d.Status, d.User, d.DecidedAt, d.GrantID = "denied", dc.User, now, dc.GrantID
	if dc.Approve {
		if len(dc.Scopes) == 0 {
			return false, &errDecision{"approve at least one permission, or deny"}
		}
		d.Status, d.Granted = "approved", dedupe(dc.Scopes)
	}
	nv, err := json.Marshal(d)
	if err != nil {
		return false, err
	}
	if err := tx.Bucket(bDevices).Put(h, nv); err != nil {
		return false, err
	}
	if dc.Approve {
		return false, nil
	}
	return true, enqueue(tx, LedgerItem{Refusal: &LedgerRefusal{
		ClaimedPrincipal: dc.User, ClaimedAgent: d.Client, RequestJWT: d.RequestJWT,
		Action:     RefusedAction{Tool: "grant_delegation", Target: strings.Join(d.Scopes, " ")},
		Reason:     "the user denied consent at " + d.Brand + " for " + strings.Join(d.Scopes, ", "),
		ObservedAt: now,
	}})
}

// pendingDevice finds the pending, unexpired device authorization of a
// user code, and its key.
func pendingDevice(tx *bolt.Tx, userCode string, now time.Time) (deviceAuth, []byte, error) {
	var d deviceAuth
	h := tx.Bucket(bUserCode).Get([]byte(normalUserCode(userCode)))
	if h == nil {
		return d, nil, &errDecision{"that code is not known: check the code your agent shows you"}
	}
	h = append([]byte(nil), h...)
	v := tx.Bucket(bDevices).Get(h)
	if v == nil {
		return d, nil, &errDecision{"that code is not known: check the code your agent shows you"}
	}
	if err := json.Unmarshal(v, &d); err != nil {
		return d, nil, err
	}
	if d.Status != "pending" {
		return d, nil, &errDecision{"this request was already answered"}
	}
	if now.After(d.Expires) {
		return d, nil, &errDecision{"this request has expired: ask your agent to start again"}
	}
	return d, h, nil
}

// normalUserCode accepts a user code typed in lower case, with spaces, or
// without its dash.
func normalUserCode(s string) string {
	s = strings.ToUpper(strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return -1
		}
		return r
	}, s))
	if len(s) == 8 {
		s = s[:4] + "-" + s[4:]
	}
	return s
}
