package brandlogin

import (
	"container/list"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/crypto/bcrypt"

	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/store"
	"github.com/pactledger/pactledger/verifier"
)

// The built-in demo Brand login: what a Brand without its own login (brand
// file without login:) gets. It checks the accounts' bcrypt password
// hashes, keeps a Brand session, signs the single-use assertion that
// returns the User to the Provider's consent page, and lists the User's
// grants so they can revoke them. It is served by the Provider's listener
// under /brands/{id}/, the way a Brand's own site would be.

const (
	brandSessionTTL = time.Hour
	assertionTTL    = 2 * time.Minute
	// MaxLoginFailures is how many failed sign-ins an email may have
	// before it is locked out for LoginLockout.
	MaxLoginFailures = 5
	// LoginLockout is how long an email stays locked out.
	LoginLockout = 15 * time.Minute
	// maxTrackedFailures bounds the emails whose failures are counted;
	// past it, those whose lockout has passed are forgotten first, then
	// those with the fewest failures, the longest without one first.
	maxTrackedFailures = 10000
	// maxEmailBytes bounds the email a sign-in may give: RFC 5321 §4.5.3.1
	// allows an address 254 octets, with room to spare for spaces around it.
	maxEmailBytes = 320
	// loginCSRFCookie is the login form's double-submit token: a cookie
	// and the same value in the form.
	loginCSRFCookie = "brand_login_csrf"
)

// demoLogin is a brand's built-in login: its assertion key and its
// sign-in failure counts.
type demoLogin struct {
	signer jose.Signer
	public *jose.JSONWebKeySet

	mu       sync.Mutex
	failures map[string]*list.Element // by email: its *loginFailures in byCount
	// byCount[i] holds the counts of i+1 failures, the last those locked
	// out, each the latest failure first.
	byCount [MaxLoginFailures]list.List

	// hashing bounds concurrent bcrypt comparisons, so a flood of sign-ins
	// cannot take every core; one for every brand's demo login (New).
	hashing chan struct{}
}

// loginFailures counts an email's failed sign-ins.
type loginFailures struct {
	email string
	n     int
	until time.Time // the last failure and LoginLockout after it
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
	return &demoLogin{signer: s, public: &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.Public()}}, failures: map[string]*list.Element{}, hashing: make(chan struct{}, 4)}, nil
}

// sign returns the compact JWS of an assertion.
func (d *demoLogin) sign(a Assertion) (string, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return "", err
	}
	jws, err := d.signer.Sign(b)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

func sessionCookie(b *brand.Brand) string { return "brand_session_" + b.ID }

// session returns the live Brand session of the request, if any, and its
// id.
func (p *Pages) session(r *http.Request, b *brand.Brand) (*store.Session, string) {
	c, err := r.Cookie(sessionCookie(b))
	if err != nil {
		return nil, ""
	}
	s, err := p.cfg.Store.Session(c.Value)
	if err != nil || s.Brand != b.ID || p.cfg.Now().After(s.Expires) {
		return nil, ""
	}
	return &s, c.Value
}

// csrf is a session's token for one form.
func csrf(s *store.Session, form string) string {
	m := hmac.New(sha256.New, s.Secret)
	m.Write([]byte(form))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func checkCSRF(s *store.Session, form, got string) bool {
	return subtle.ConstantTimeCompare([]byte(csrf(s, form)), []byte(got)) == 1
}

// ServeDemo serves /brands/{id}/{op} of a brand HasDemo reports.
func (p *Pages) ServeDemo(w http.ResponseWriter, r *http.Request, b *brand.Brand, op string) {
	type handler struct {
		method string
		fn     func(http.ResponseWriter, *http.Request, *brand.Brand)
	}
	routes := map[string][]handler{
		"login":         {{http.MethodGet, p.loginPage}, {http.MethodHead, p.loginPage}, {http.MethodPost, p.loginSubmit}},
		"logout":        {{http.MethodPost, p.logout}},
		"grants":        {{http.MethodGet, p.grantsPage}, {http.MethodHead, p.grantsPage}},
		"grants/revoke": {{http.MethodPost, p.revokeSubmit}},
	}
	hs, ok := routes[op]
	if !ok || !p.HasDemo(b.ID) {
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
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	w.WriteHeader(http.StatusMethodNotAllowed)
}

// loginPage shows the sign-in form, or, with a live session, a Continue
// button: the Brand's session spares the User a second password entry.
func (p *Pages) loginPage(w http.ResponseWriter, r *http.Request, b *brand.Brand) {
	q := r.URL.Query()
	p.renderLogin(w, r, b, q.Get("return_to"), oauth.NormalUserCode(q.Get("user_code")), "", http.StatusOK)
}

func (p *Pages) renderLogin(w http.ResponseWriter, r *http.Request, b *brand.Brand, returnTo, userCode, errText string, code int) {
	if returnTo != "" && returnTo != p.ReturnURL(b) {
		messagePage(w, http.StatusBadRequest, "Unknown return address", "This sign-in link does not come from "+b.Organization+"'s agent.")
		return
	}
	token := oauth.NewSecret("")
	http.SetCookie(w, &http.Cookie{Name: loginCSRFCookie, Value: token, Path: "/brands/" + b.ID + "/", HttpOnly: true,
		Secure: p.secureCookies(), SameSite: http.SameSiteStrictMode})
	data := map[string]any{"Title": "Sign in to " + b.Organization, "Brand": b.Organization, "Error": errText, "UserCode": userCode,
		"ReturnTo": returnTo, "CSRF": token, "Action": p.demoBase(b) + "/login", "LogoutAction": p.demoBase(b) + "/logout"}
	if s, _ := p.session(r, b); s != nil {
		data["SignedInAs"] = displayUser(b, s.User)
		data["LogoutCSRF"] = csrf(s, "logout")
	}
	page(w, code, "login", data)
}

// loginSubmit checks the password (or the live session), then either hands
// the User back to the Provider with an assertion (a device-code sign-in)
// or opens the account page.
func (p *Pages) loginSubmit(w http.ResponseWriter, r *http.Request, b *brand.Brand) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		messagePage(w, http.StatusBadRequest, "Something went wrong", "The form could not be read.")
		return
	}
	f := r.PostForm
	returnTo, userCode := f.Get("return_to"), oauth.NormalUserCode(f.Get("user_code"))
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
		if len(f.Get("email")) > maxEmailBytes {
			p.renderLogin(w, r, b, returnTo, userCode, "That email address is too long.", http.StatusBadRequest)
			return
		}
		user, msg := p.checkPassword(b, f.Get("email"), f.Get("password"))
		if user == "" {
			p.failed.Log(r.Context(), p.cfg.Logger, slog.LevelInfo, "demo brand sign-in failed", slog.String("brand", b.ID))
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
	now := p.cfg.Now()
	assertion, err := p.demo[b.ID].sign(Assertion{UserCode: userCode, Claims: verifier.Claims{Issuer: p.demoBase(b), Audience: []string{returnTo},
		Subject: s.User, ID: oauth.NewSecret(""), IssuedAt: verifier.NumericDateOf(now), Expiry: verifier.NumericDateOf(now.Add(assertionTTL))}})
	if err != nil {
		messagePage(w, http.StatusInternalServerError, "Something went wrong", "Please try again.")
		return
	}
	page(w, http.StatusOK, "handoff", map[string]any{"Title": "Signed in to " + b.Organization, "Brand": b.Organization,
		"SignedInAs": displayUser(b, s.User), "Assertion": assertion, "Action": returnTo}, origin(returnTo))
}

// dummyHash is compared against when the email is unknown, so a wrong
// email costs as long as a wrong password.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("not a password"), bcrypt.DefaultCost)

// checkPassword returns the account id for a correct email and password,
// else "" and what to tell the User. Repeated failures lock the email out
// for a while.
func (p *Pages) checkPassword(b *brand.Brand, email, password string) (string, string) {
	d := p.demo[b.ID]
	key := strings.ToLower(strings.TrimSpace(email))
	now := p.cfg.Now()
	if d.locked(key, now) {
		return "", "Too many failed attempts. Try again in a few minutes."
	}
	var acct *brand.Account
	for i := range b.Accounts {
		if strings.EqualFold(b.Accounts[i].Email, key) && b.Accounts[i].PasswordHash != "" {
			acct = &b.Accounts[i]
		}
	}
	hash := dummyHash
	if acct != nil {
		hash = []byte(acct.PasswordHash)
	}
	wait := time.NewTimer(5 * time.Second)
	defer wait.Stop()
	select {
	case d.hashing <- struct{}{}:
	case <-wait.C:
		return "", "The sign-in service is busy. Please try again in a moment."
	}
	bad := bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil
	<-d.hashing
	if bad || acct == nil {
		d.fail(key, now)
		return "", "That email and password do not match."
	}
	d.succeeded(key)
	return acct.ID, ""
}

// locked reports whether key is locked out at now.
func (d *demoLogin) locked(key string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.failures[key]
	if e == nil {
		return false
	}
	f := e.Value.(*loginFailures)
	return f.n >= MaxLoginFailures && now.Before(f.until)
}

// succeeded forgets key's failures.
func (d *demoLogin) succeeded(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.failures[key]; e != nil {
		d.forget(e)
	}
}

// fail counts a failed sign-in of key at now.
//
// Each list is in the order of the last failure, so the counts whose
// lockout has passed are at its back: a new email drops them, and then,
// at maxTrackedFailures, the oldest of those with the fewest failures.
// Each count is dropped once, so a failure costs O(1) however full the
// table. To have an email's n failures forgotten, one must first fail n
// times with each of a table of other emails after it: maxTrackedFailures
// bcrypt comparisons, of the few the login runs at a time, for each
// further guess at that email's password.
func (d *demoLogin) fail(key string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.failures[key]; e != nil {
		f := e.Value.(*loginFailures)
		d.listOf(f).Remove(e)
		if now.After(f.until) {
			f.n = 0
		}
		f.n++
		f.until = now.Add(LoginLockout)
		d.failures[key] = d.listOf(f).PushFront(f)
		return
	}
	for i := range d.byCount {
		l := &d.byCount[i]
		for e := l.Back(); e != nil && now.After(e.Value.(*loginFailures).until); e = l.Back() {
			d.forget(e)
		}
	}
	if len(d.failures) >= maxTrackedFailures {
		for i := range d.byCount {
			if e := d.byCount[i].Back(); e != nil {
				d.forget(e)
				break
			}
		}
	}
	f := &loginFailures{email: key, n: 1, until: now.Add(LoginLockout)}
	d.failures[key] = d.listOf(f).PushFront(f)
}

// listOf is the list f belongs in.
func (d *demoLogin) listOf(f *loginFailures) *list.List {
	return &d.byCount[min(f.n, MaxLoginFailures)-1]
}

// forget drops the count of e.
func (d *demoLogin) forget(e *list.Element) {
	f := e.Value.(*loginFailures)
	d.listOf(f).Remove(e)
	delete(d.failures, f.email)
}

func (p *Pages) newSession(w http.ResponseWriter, b *brand.Brand, user string) (*store.Session, error) {
	id := oauth.NewSecret("")
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	now := p.cfg.Now()
	s := store.Session{Brand: b.ID, User: user, Expires: now.Add(brandSessionTTL), Secret: secret}
	if err := p.cfg.Store.NewSession(id, s, now); err != nil {
		return nil, err
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie(b), Value: id, Path: "/brands/" + b.ID + "/", MaxAge: int(brandSessionTTL / time.Second),
		HttpOnly: true, Secure: p.secureCookies(), SameSite: http.SameSiteLaxMode})
	return &s, nil
}

func (p *Pages) logout(w http.ResponseWriter, r *http.Request, b *brand.Brand) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	s, id := p.session(r, b)
	if s == nil || r.ParseForm() != nil || !checkCSRF(s, "logout", r.PostForm.Get("csrf")) {
		http.Redirect(w, r, p.demoBase(b)+"/login", http.StatusSeeOther)
		return
	}
	if err := p.cfg.Store.DeleteSession(id); err != nil {
		p.cfg.Logger.ErrorContext(r.Context(), "brand sign-out", slog.String("error", err.Error()))
		messagePage(w, http.StatusInternalServerError, "Something went wrong", "Please try again.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie(b), Value: "", Path: "/brands/" + b.ID + "/", MaxAge: -1, HttpOnly: true})
	messagePage(w, http.StatusOK, "Signed out", "", "You are signed out of "+b.Organization+".")
}
