package pact

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	bolt "go.etcd.io/bbolt"
)

// The consent step of PACT §5.3: the Brand's login returns the User with a
// signed, single-use assertion bound to the user_code, sent by POST; the
// Provider verifies it, then shows consent as that User.

var (
	bAssertions = []byte("login_assertions") // used assertion ids, until they expire
	bTickets    = []byte("consent_tickets")
)

const (
	// maxAssertionTTL bounds an assertion's lifetime (exp - iat).
	maxAssertionTTL = 5 * time.Minute
	consentTTL      = 10 * time.Minute
	consentCookie   = "pact_consent"
)

// loginAssertion is what a Brand's login signs: who signed in, for which
// user code, for which Provider consent page.
type loginAssertion struct {
	Iss      string `json:"iss"`
	Aud      string `json:"aud"`
	Sub      string `json:"sub"` // the Brand's user id
	UserCode string `json:"user_code"`
	Jti      string `json:"jti"`
	Iat      int64  `json:"iat"`
	Exp      int64  `json:"exp"`
}

// consentTicket ties a consent form to the browser it was shown to (by a
// cookie's hash) and to the signed-in User.
type consentTicket struct {
	Brand      string    `json:"brand"`
	User       string    `json:"user"`
	UserCode   string    `json:"userCode"`
	CookieHash []byte    `json:"cookieHash"`
	Expires    time.Time `json:"expires"`
}

// assertionKeys are the keys and issuer that verify a Brand's assertions:
// its configured login, or the built-in demo login.
func (p *Provider) assertionKeys(b *Brand) (*jose.JSONWebKeySet, string) {
	if b.Login != nil {
		return b.Login.KeySet(), b.Login.Issuer
	}
	if d := p.demo[b.ID]; d != nil {
		return d.public, p.demoBase(b)
	}
	return nil, ""
}

// verifyAssertion checks a login assertion: ES256 or RS256 by a key of the
// Brand's login, its issuer, aud this Brand's consent page, a short life
// (at most 5 minutes, 30 s skew) and a user code.
func (p *Provider) verifyAssertion(b *Brand, raw string, now time.Time) (*loginAssertion, error) {
	keys, iss := p.assertionKeys(b)
	if keys == nil {
		return nil, errors.New("this brand has no login")
	}
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.ES256, jose.RS256})
	if err != nil || len(jws.Signatures) != 1 {
		return nil, errors.New("not a signed assertion")
	}
	h := jws.Signatures[0].Header
	found := keys.Key(h.KeyID)
	if h.KeyID == "" || len(found) != 1 {
		return nil, errors.New("signed by an unknown key")
	}
	k := found[0]
	if k.Algorithm != "" && k.Algorithm != h.Algorithm {
		return nil, errors.New("the key is not for this algorithm")
	}
	payload, err := jws.Verify(k.Key)
	if err != nil {
		return nil, errors.New("bad signature")
	}
	var a loginAssertion
	if err := json.Unmarshal(payload, &a); err != nil {
		return nil, errors.New("unreadable claims")
	}
	iat, exp := time.Unix(a.Iat, 0), time.Unix(a.Exp, 0)
	switch {
	case a.Iss != iss:
		return nil, fmt.Errorf("issuer %q is not the brand's login", a.Iss)
	case a.Aud != p.ReturnURL(b):
		return nil, errors.New("meant for another consent page")
	case a.Sub == "" || a.UserCode == "" || a.Jti == "":
		return nil, errors.New("sub, user_code and jti are required")
	case exp.Sub(iat) > maxAssertionTTL || !exp.After(iat):
		return nil, errors.New("lifetime longer than 5 minutes")
	case iat.After(now.Add(30 * time.Second)):
		return nil, errors.New("issued in the future")
	case now.After(exp.Add(30 * time.Second)):
		return nil, errors.New("expired")
	}
	return &a, nil
}

// consentIn is POST {issuer}/consent: the Brand's login returns the User
// with an assertion. The Provider accepts each assertion once, then shows
// consent, or approves at once when an unexpired grant for (User, personal
// agent) already covers the request.
func (p *Provider) consentIn(w http.ResponseWriter, r *http.Request, b *Brand) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		messagePage(w, http.StatusBadRequest, "Something went wrong", "The sign-in could not be read. Start again from the link your agent shows you.")
		return
	}
	now := p.cfg.Now().UTC()
	a, err := p.verifyAssertion(b, r.PostForm.Get("assertion"), now)
	if err != nil {
		p.cfg.Logger.InfoContext(r.Context(), "login assertion rejected", slog.String("brand", b.ID), slog.String("reason", err.Error()))
		messagePage(w, http.StatusBadRequest, "Sign-in not accepted", "Your sign-in could not be confirmed ("+err.Error()+"). Start again from the link your agent shows you.")
		return
	}
	cookie := randomToken("")
	ticket := randomToken("ct_")
	var d deviceAuth
	var cover *grant
	err = p.store.db.Update(func(tx *bolt.Tx) error {
		if err := pruneConsent(tx, now); err != nil {
			return err
		}
		used := tx.Bucket(bAssertions)
		key := hashToken(a.Iss + "\x00" + a.Jti)
		if used.Get(key) != nil {
			return &errDecision{"this sign-in was already used: sign in again"}
		}
		exp, _ := time.Unix(a.Exp, 0).Add(time.Minute).MarshalText()
		if err := used.Put(key, exp); err != nil {
			return err
		}
		var err error
		if d, _, err = pendingDevice(tx, a.UserCode, now); err != nil {
			return err
		}
		if d.Brand != b.ID {
			return &errDecision{"that code is not known: check the code your agent shows you"}
		}
		if cover, err = coveringGrant(tx, b.ID, a.Sub, d.Client, d.Scopes, now); err != nil || cover != nil {
			return err
		}
		v, err := json.Marshal(consentTicket{Brand: b.ID, User: a.Sub, UserCode: d.UserCode, CookieHash: hashToken(cookie), Expires: now.Add(consentTTL)})
		if err != nil {
			return err
		}
		return tx.Bucket(bTickets).Put(hashToken(ticket), v)
	})
	var de *errDecision
	switch {
	case errors.As(err, &de):
		messagePage(w, http.StatusBadRequest, "This request cannot be answered", de.msg)
		return
	case err != nil:
		p.cfg.Logger.ErrorContext(r.Context(), "consent", slog.String("error", err.Error()))
		messagePage(w, http.StatusInternalServerError, "Something went wrong", "Please try again.")
		return
	}
	if cover != nil {
		// PACT §5.3: consent may be skipped when a grant covers the request.
		if err := p.decide(decision{UserCode: d.UserCode, User: a.Sub, Approve: true, Scopes: d.Scopes, GrantID: cover.ID}); err != nil {
			p.decisionError(w, r, err)
			return
		}
		messagePage(w, http.StatusOK, "Already allowed", "",
			"You had already allowed "+origin(d.Client)+": "+strings.Join(p.describe(b, d.Scopes), "; ")+".",
			"You can close this page and return to your agent.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: consentCookie, Value: cookie, Path: "/a2a/" + b.ID + "/oauth/", MaxAge: int(consentTTL / time.Second),
		HttpOnly: true, Secure: p.secureCookies(), SameSite: http.SameSiteStrictMode})
	type scopeView struct{ ID, Description, Slug string }
	var scopes []scopeView
	for _, id := range b.CardOrder(d.Scopes) {
		scopes = append(scopes, scopeView{id, p.describe(b, []string{id})[0], slug(id)})
	}
	page(w, http.StatusOK, "consent", map[string]any{
		"Title": "Allow access to your " + b.Organization + " account?", "Brand": b.Organization, "PAOrigin": origin(d.Client), "PA": d.Client,
		"User": p.displayUser(b, a.Sub), "UserCode": d.UserCode, "Ticket": ticket, "Scopes": scopes, "Action": p.issuer(b) + "/decision",
	})
}

// decisionIn is POST {issuer}/decision: approve with the checked scopes, or
// deny. The form's ticket must match the cookie set with it.
func (p *Provider) decisionIn(w http.ResponseWriter, r *http.Request, b *Brand) {
	if o := r.Header.Get("Origin"); o != "" && o != "null" && o != origin(p.cfg.BaseURL) {
		messagePage(w, http.StatusForbidden, "Request refused", "This form was sent from another site.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		messagePage(w, http.StatusBadRequest, "Something went wrong", "The form could not be read.")
		return
	}
	choice, kept := r.PostForm.Get("decision"), r.PostForm["scope"]
	switch {
	case choice != "approve" && choice != "deny":
		messagePage(w, http.StatusBadRequest, "Something went wrong", "Choose Allow or Deny.")
		return
	case choice == "approve" && len(kept) == 0:
		// The form stays valid: the User goes back and chooses again.
		messagePage(w, http.StatusBadRequest, "Nothing was allowed", "Check at least one permission and press Allow, or press Deny. Go back to the previous page to choose.")
		return
	}
	c, cerr := r.Cookie(consentCookie)
	now := p.cfg.Now().UTC()
	var refused bool
	// The ticket is spent and the decision recorded in one transaction:
	// a refused decision leaves the form usable, a crash loses neither.
	err := p.store.db.Update(func(tx *bolt.Tx) error {
		key := hashToken(r.PostForm.Get("ticket"))
		v := tx.Bucket(bTickets).Get(key)
		if v == nil {
			return &errDecision{"this page has expired or was already answered: start again from the link your agent shows you"}
		}
		var t consentTicket
		if err := json.Unmarshal(v, &t); err != nil {
			return err
		}
		if cerr != nil || subtle.ConstantTimeCompare(hashToken(c.Value), t.CookieHash) != 1 || t.Brand != b.ID {
			return &errDecision{"this form does not belong to this browser session: start again from the link your agent shows you"}
		}
		if now.After(t.Expires) {
			return &errDecision{"this page has expired: start again from the link your agent shows you"}
		}
		if err := tx.Bucket(bTickets).Delete(key); err != nil {
			return err
		}
		dc := decision{UserCode: t.UserCode, User: t.User}
		if choice == "approve" {
			dc.Approve, dc.Scopes = true, kept
		}
		var err error
		refused, err = decideTx(tx, dc, now)
		return err
	})
	if err != nil {
		p.decisionError(w, r, err)
		return
	}
	if refused {
		p.wakePipeline()
	}
	http.SetCookie(w, &http.Cookie{Name: consentCookie, Value: "", Path: "/a2a/" + b.ID + "/oauth/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	if choice == "deny" {
		messagePage(w, http.StatusOK, "Denied", "", "You denied the request. Your personal agent cannot act on your "+b.Organization+" account.",
			"You can close this page.")
		return
	}
	messagePage(w, http.StatusOK, "Allowed", "", "You allowed your personal agent: "+strings.Join(p.describe(b, kept), "; ")+".",
		"You can close this page and return to your agent.")
}

func (p *Provider) decisionError(w http.ResponseWriter, r *http.Request, err error) {
	var de *errDecision
	if errors.As(err, &de) {
		messagePage(w, http.StatusBadRequest, "This request cannot be answered", de.msg)
		return
	}
	p.cfg.Logger.ErrorContext(r.Context(), "consent decision", slog.String("error", err.Error()))
	messagePage(w, http.StatusInternalServerError, "Something went wrong", "Please try again.")
}

// coveringGrant finds an unexpired, unrevoked grant of user to client at
// brand whose scopes include every one of scopes.
func coveringGrant(tx *bolt.Tx, brand, user, client string, scopes []string, now time.Time) (*grant, error) {
	gs, err := userGrants(tx, brand, user)
	if err != nil {
		return nil, err
	}
	// userGrants lists the newest first: the newest covering grant wins.
	for i, g := range gs {
		if g.Client == client && g.Revoked.IsZero() && !now.After(g.Expires) && g.covers(scopes) {
			return &gs[i], nil
		}
	}
	return nil, nil
}

// covers reports whether the grant includes every one of scopes.
func (g *grant) covers(scopes []string) bool {
	for _, s := range scopes {
		if !slices.Contains(g.Scopes, s) {
			return false
		}
	}
	return true
}

// describe returns the descriptions of scope ids, verbatim from the card.
func (p *Provider) describe(b *Brand, ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		d := id
		for _, s := range b.Scopes {
			if s.ID == id {
				d = s.Description
			}
		}
		out = append(out, d)
	}
	return out
}

// displayUser names a Brand user on pages: the account's email when the
// brand lists it.
func (p *Provider) displayUser(b *Brand, id string) string {
	if a := b.Account(id); a != nil && a.Email != "" {
		return a.Email
	}
	return id
}

// slug makes a scope id usable as an HTML id.
func slug(id string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, id)
}

// origin is a URL's scheme and host.
func origin(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return s
	}
	return u.Scheme + "://" + u.Host
}

// pruneConsent drops, in the consent transaction, used assertion ids and
// consent tickets that have expired.
func pruneConsent(tx *bolt.Tx, now time.Time) error {
	c := tx.Bucket(bAssertions).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var exp time.Time
		if exp.UnmarshalText(v) == nil && now.After(exp) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
	}
	c = tx.Bucket(bTickets).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var t consentTicket
		if json.Unmarshal(v, &t) == nil && now.After(t.Expires) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
	}
	return nil
}
