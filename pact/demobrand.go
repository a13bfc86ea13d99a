package pact

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/crypto/bcrypt"
)

// The built-in demo Brand login: what a Brand without its own login
// (brand file without login:) gets. It checks the accounts' bcrypt password
// hashes, keeps a Brand session, signs the single-use assertion that
// returns the User to the Provider's consent page, and lists the User's
// grants so they can revoke them. It is served by the Provider's listener
// under /brands/{id}/, the way a Brand's own site would be.

var bBrandSessions = []byte("brand_sessions")

const (
	brandSessionTTL = time.Hour
	assertionTTL    = 2 * time.Minute
	// Failed sign-ins per email before a lock-out of loginLockout.
	maxLoginFailures = 5
	loginLockout     = 15 * time.Minute
)

// demoLogin is a brand's built-in login: its assertion key.
type demoLogin struct {
	signer jose.Signer
	public *jose.JSONWebKeySet

	mu       sync.Mutex
	failures map[string]loginFailures

	// hashing bounds concurrent bcrypt comparisons, so a flood of sign-ins
	// cannot take every core.
	hashing chan struct{}
}

// maxTrackedFailures bounds the failure counts kept in memory.
const maxTrackedFailures = 10000

type loginFailures struct {
	n     int
	until time.Time
}

func newDemoLogin() (*demoLogin, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	k := jose.JSONWebKey{Key: priv, KeyID: "demo-login-" + hex.EncodeToString(id), Algorithm: string(jose.ES256), Use: "sig"}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	return &demoLogin{signer: s, public: &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.Public()}}, failures: map[string]loginFailures{}, hashing: make(chan struct{}, 4)}, nil
}

// secureCookies: the pages' cookies are Secure when the Provider is served
// over https.
func (p *Provider) secureCookies() bool { return strings.HasPrefix(p.cfg.BaseURL, "https://") }

// demoBase is where a brand's built-in login is served.
func (p *Provider) demoBase(b *Brand) string { return p.cfg.BaseURL + "/brands/" + b.ID }

// brandSession is a User signed in at the demo Brand.
type brandSession struct {
	Brand   string    `json:"brand"`
	User    string    `json:"user"`
	Expires time.Time `json:"expires"`
	Secret  []byte    `json:"secret"` // keys the session's CSRF tokens
}

func (p *Provider) sessionCookie(b *Brand) string { return "brand_session_" + b.ID }

// session returns the live Brand session of the request, if any.
func (p *Provider) session(r *http.Request, b *Brand) (*brandSession, string) {
	c, err := r.Cookie(p.sessionCookie(b))
	if err != nil {
		return nil, ""
	}
	var s brandSession
	err = p.store.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bBrandSessions).Get(hashToken(c.Value))
		if v == nil {
			return errors.New("no session")
		}
		return json.Unmarshal(v, &s)
	})
	if err != nil || s.Brand != b.ID || p.cfg.Now().After(s.Expires) {
		return nil, ""
	}
	return &s, c.Value
}

// csrf is a session's token for one form.
func (s *brandSession) csrf(form string) string {
	m := hmac.New(sha256.New, s.Secret)
	m.Write([]byte(form))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *brandSession) checkCSRF(form, got string) bool {
	return subtle.ConstantTimeCompare([]byte(s.csrf(form)), []byte(got)) == 1
}

// serveDemo serves /brands/{id}/{op}.
func (p *Provider) serveDemo(w http.ResponseWriter, r *http.Request, b *Brand, op string) {
	type handler struct {
		method string
		fn     func(http.ResponseWriter, *http.Request, *Brand)
	}
	routes := map[string][]handler{
		"login":         {{http.MethodGet, p.loginPage}, {http.MethodHead, p.loginPage}, {http.MethodPost, p.loginSubmit}},
		"logout":        {{http.MethodPost, p.logout}},
		"grants":        {{http.MethodGet, p.grantsPage}, {http.MethodHead, p.grantsPage}},
		"grants/revoke": {{http.MethodPost, p.revokeSubmit}},
	}
	hs, ok := routes[op]
	if !ok {
		http.NotFound(w, r)
		return
	}
	var allowed []string
	for _, h := range hs {
		if h.method == r.Method {
			h.fn(w, r, b)
			return
		}
		allowed = append(allowed, h.method)
	}
	methodNotAllowed(w, strings.Join(allowed, ", "))
}

// loginCSRF is the login form's double-submit token: a cookie and the same
// value in the form.
const loginCSRFCookie = "brand_login_csrf"

// loginPage shows the sign-in form, or, with a live session, a Continue
// button: the Brand's session spares the User a second password entry.
func (p *Provider) loginPage(w http.ResponseWriter, r *http.Request, b *Brand) {
	q := r.URL.Query()
	p.renderLogin(w, r, b, q.Get("return_to"), normalUserCode(q.Get("user_code")), "", http.StatusOK)
}

func (p *Provider) renderLogin(w http.ResponseWriter, r *http.Request, b *Brand, returnTo, userCode, errText string, code int) {
	if returnTo != "" && returnTo != p.ReturnURL(b) {
		messagePage(w, http.StatusBadRequest, "Unknown return address", "This sign-in link does not come from "+b.Organization+"'s agent.")
		return
	}
	token := randomToken("")
	http.SetCookie(w, &http.Cookie{Name: loginCSRFCookie, Value: token, Path: "/brands/" + b.ID + "/", HttpOnly: true,
		Secure: p.secureCookies(), SameSite: http.SameSiteStrictMode})
	data := map[string]any{"Title": "Sign in to " + b.Organization, "Brand": b.Organization, "Error": errText, "UserCode": userCode,
		"ReturnTo": returnTo, "CSRF": token, "Action": p.demoBase(b) + "/login", "LogoutAction": p.demoBase(b) + "/logout"}
	if s, _ := p.session(r, b); s != nil {
		data["SignedInAs"] = p.displayUser(b, s.User)
		data["LogoutCSRF"] = s.csrf("logout")
	}
	page(w, code, "login", data)
}

// loginSubmit checks the password (or the live session), then either hands
// the User back to the Provider with an assertion (a device-code sign-in)
// or opens the account page.
func (p *Provider) loginSubmit(w http.ResponseWriter, r *http.Request, b *Brand) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		messagePage(w, http.StatusBadRequest, "Something went wrong", "The form could not be read.")
		return
	}
	f := r.PostForm
	returnTo, userCode := f.Get("return_to"), normalUserCode(f.Get("user_code"))
	c, err := r.Cookie(loginCSRFCookie)
	if err != nil || f.Get("csrf") == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(f.Get("csrf"))) != 1 {
		p.renderLogin(w, r, b, returnTo, userCode, "Your session expired. Please try again.", http.StatusForbidden)
		return
	}
	if returnTo != "" && returnTo != p.ReturnURL(b) {
		messagePage(w, http.StatusBadRequest, "Unknown return address", "This sign-in link does not come from "+b.Organization+"'s agent.")
		return
	}
	s, _ := p.session(r, b)
	if s == nil || f.Get("email") != "" {
		user, msg := p.checkPassword(b, f.Get("email"), f.Get("password"))
		if user == "" {
			p.cfg.Logger.InfoContext(r.Context(), "demo brand sign-in failed", slog.String("brand", b.ID))
			p.renderLogin(w, r, b, returnTo, userCode, msg, http.StatusUnauthorized)
			return
		}
		if s, err = p.newSession(w, b, user); err != nil {
			p.cfg.Logger.ErrorContext(r.Context(), "brand session", slog.String("error", err.Error()))
			messagePage(w, http.StatusInternalServerError, "Something went wrong", "Please try again.")
			return
		}
	}
	if returnTo == "" {
		http.Redirect(w, r, p.demoBase(b)+"/grants", http.StatusSeeOther)
		return
	}
	if userCode == "" {
		p.renderLogin(w, r, b, returnTo, "", "Enter the code your agent shows you.", http.StatusBadRequest)
		return
	}
	assertion, err := p.demo[b.ID].sign(loginAssertion{Iss: p.demoBase(b), Aud: returnTo, Sub: s.User, UserCode: userCode,
		Jti: randomToken(""), Iat: p.cfg.Now().Unix(), Exp: p.cfg.Now().Add(assertionTTL).Unix()})
	if err != nil {
		messagePage(w, http.StatusInternalServerError, "Something went wrong", "Please try again.")
		return
	}
	page(w, http.StatusOK, "handoff", map[string]any{"Title": "Signed in to " + b.Organization, "Brand": b.Organization,
		"SignedInAs": p.displayUser(b, s.User), "Assertion": assertion, "Action": returnTo}, origin(returnTo))
}

func (d *demoLogin) sign(a loginAssertion) (string, error) { return compact(d.signer, a) }

// dummyHash is compared against when the email is unknown, so a wrong
// email costs as long as a wrong password.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("not a password"), bcrypt.DefaultCost)

// checkPassword returns the account id for a correct email and password,
// else "" and what to tell the User. Repeated failures lock the email out
// for a while.
func (p *Provider) checkPassword(b *Brand, email, password string) (string, string) {
	d := p.demo[b.ID]
	key := strings.ToLower(strings.TrimSpace(email))
	now := p.cfg.Now()
	d.mu.Lock()
	f := d.failures[key]
	d.mu.Unlock()
	if f.n >= maxLoginFailures && now.Before(f.until) {
		return "", "Too many failed attempts. Try again in a few minutes."
	}
	var acct *Account
	for i := range b.Accounts {
		if strings.EqualFold(b.Accounts[i].Email, key) && b.Accounts[i].PasswordHash != "" {
			acct = &b.Accounts[i]
		}
	}
	hash := dummyHash
	if acct != nil {
		hash = []byte(acct.PasswordHash)
	}
	select {
	case d.hashing <- struct{}{}:
	case <-time.After(5 * time.Second):
		return "", "The sign-in service is busy. Please try again in a moment."
	}
	bad := bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil
	<-d.hashing
	if bad || acct == nil {
		d.mu.Lock()
		if len(d.failures) >= maxTrackedFailures {
			for k, f := range d.failures {
				if now.After(f.until) {
					delete(d.failures, k)
				}
			}
		}
		f := d.failures[key]
		if now.After(f.until) {
			f = loginFailures{}
		}
		f.n++
		f.until = now.Add(loginLockout)
		d.failures[key] = f
		d.mu.Unlock()
		return "", "That email and password do not match."
	}
	d.mu.Lock()
	delete(d.failures, key)
	d.mu.Unlock()
	return acct.ID, ""
}

func (p *Provider) newSession(w http.ResponseWriter, b *Brand, user string) (*brandSession, error) {
	id := randomToken("")
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	s := &brandSession{Brand: b.ID, User: user, Expires: p.cfg.Now().Add(brandSessionTTL), Secret: secret}
	v, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	now := p.cfg.Now()
	err = p.store.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bBrandSessions)
		c := bk.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var old brandSession
			if json.Unmarshal(v, &old) == nil && now.After(old.Expires) {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return bk.Put(hashToken(id), v)
	})
	if err != nil {
		return nil, err
	}
	http.SetCookie(w, &http.Cookie{Name: p.sessionCookie(b), Value: id, Path: "/brands/" + b.ID + "/", MaxAge: int(brandSessionTTL / time.Second),
		HttpOnly: true, Secure: p.secureCookies(), SameSite: http.SameSiteLaxMode})
	return s, nil
}

func (p *Provider) logout(w http.ResponseWriter, r *http.Request, b *Brand) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	s, id := p.session(r, b)
	if s == nil || r.ParseForm() != nil || !s.checkCSRF("logout", r.PostForm.Get("csrf")) {
		http.Redirect(w, r, p.demoBase(b)+"/login", http.StatusSeeOther)
		return
	}
	_ = p.store.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bBrandSessions).Delete(hashToken(id)) })
	http.SetCookie(w, &http.Cookie{Name: p.sessionCookie(b), Value: "", Path: "/brands/" + b.ID + "/", MaxAge: -1, HttpOnly: true})
	messagePage(w, http.StatusOK, "Signed out", "", "You are signed out of "+b.Organization+".")
}

// grantView is one grant on the account page.
type grantView struct {
	ID, Agent, Created, Status string
	Scopes                     []string
	Active                     bool
}

// grantsPage lists the personal agents the signed-in User allowed, with a
// Revoke button each.
func (p *Provider) grantsPage(w http.ResponseWriter, r *http.Request, b *Brand) {
	s, _ := p.session(r, b)
	if s == nil {
		p.renderLogin(w, r, b, "", "", "", http.StatusOK)
		return
	}
	gs, err := p.UserGrants(b.ID, s.User)
	if err != nil {
		messagePage(w, http.StatusInternalServerError, "Something went wrong", "Please try again.")
		return
	}
	now := p.cfg.Now()
	var views []grantView
	for _, g := range gs {
		v := grantView{ID: g.ID, Agent: g.Client, Created: g.Created.Format("2 Jan 2006 15:04 MST"), Scopes: p.describe(b, g.Scopes), Active: true,
			Status: "until " + g.Expires.Format("2 Jan 2006")}
		switch {
		case !g.Revoked.IsZero():
			v.Active, v.Status = false, "revoked "+g.Revoked.Format("2 Jan 2006 15:04 MST")
		case now.After(g.Expires):
			v.Active, v.Status = false, "expired"
		}
		views = append(views, v)
	}
	page(w, http.StatusOK, "grants", map[string]any{"Title": b.Organization + ": personal agents", "Brand": b.Organization,
		"SignedInAs": p.displayUser(b, s.User), "Grants": views, "CSRF": s.csrf("revoke"), "Action": p.demoBase(b) + "/grants/revoke",
		"LogoutAction": p.demoBase(b) + "/logout", "LogoutCSRF": s.csrf("logout")})
}

func (p *Provider) revokeSubmit(w http.ResponseWriter, r *http.Request, b *Brand) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	s, _ := p.session(r, b)
	if s == nil {
		http.Redirect(w, r, p.demoBase(b)+"/login", http.StatusSeeOther)
		return
	}
	if r.ParseForm() != nil || !s.checkCSRF("revoke", r.PostForm.Get("csrf")) {
		messagePage(w, http.StatusForbidden, "Request refused", "This form has expired. Open your account page again.")
		return
	}
	if err := p.RevokeGrant(b.ID, s.User, r.PostForm.Get("grant")); err != nil {
		messagePage(w, http.StatusBadRequest, "Not revoked", err.Error())
		return
	}
	http.Redirect(w, r, p.demoBase(b)+"/grants", http.StatusSeeOther)
}

// UserGrants lists a Brand user's grants, newest first.
func (p *Provider) UserGrants(brand, user string) ([]grant, error) {
	var out []grant
	err := p.store.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = userGrants(tx, brand, user)
		return err
	})
	return out, err
}

// userGrants lists a Brand user's grants in tx, newest first.
func userGrants(tx *bolt.Tx, brand, user string) ([]grant, error) {
	var out []grant
	err := tx.Bucket(bGrants).ForEach(func(_, v []byte) error {
		var g grant
		if err := json.Unmarshal(v, &g); err != nil {
			return err
		}
		if g.Brand == brand && g.User == user {
			out = append(out, g)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b grant) int { return b.Created.Compare(a.Created) })
	return out, err
}

// RevokeGrant revokes a grant of a Brand user at the Provider (its
// delegation and refresh tokens stop working) and queues the revocation
// for the ledger.
func (p *Provider) RevokeGrant(brand, user, id string) error {
	now := p.cfg.Now().UTC()
	err := p.store.db.Update(func(tx *bolt.Tx) error {
		var g grant
		v := tx.Bucket(bGrants).Get([]byte(id))
		if v == nil || json.Unmarshal(v, &g) != nil || g.Brand != brand || g.User != user {
			return errors.New("there is no such grant on your account")
		}
		if !g.Revoked.IsZero() {
			return nil
		}
		g.Revoked = now
		nv, err := json.Marshal(g)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bGrants).Put([]byte(id), nv); err != nil {
			return err
		}
		return enqueue(tx, LedgerItem{Revocation: &LedgerRevocation{GrantID: id, RevokedAt: now, Note: "revoked by the user " + user + " at " + brand}})
	})
	if err == nil {
		p.wakePipeline()
	}
	return err
}
