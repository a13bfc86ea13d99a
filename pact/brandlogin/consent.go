package brandlogin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/store"
	"github.com/pactledger/pactledger/verifier"
)

// The consent step of PACT §5.3: the Brand's login returns the User with a
// signed, single-use assertion bound to the user_code, sent by POST; the
// Provider verifies it, then shows consent as that User.

const (
	// maxAssertionTTL bounds an assertion's lifetime (exp - iat).
	maxAssertionTTL = 5 * time.Minute
	// assertionLeeway is the clock skew allowed on an assertion's times.
	assertionLeeway = 30 * time.Second
	consentTTL      = 10 * time.Minute
	consentCookie   = "pact_consent"
)

// Assertion is what a Brand's login signs (ES256 or RS256, with the kid of
// a key the brand file lists) and POSTs, as the form field assertion, to
// the Provider's consent page: who signed in (sub, the Brand's user id),
// for which user code, for which consent page (aud), once (jti), for at
// most 5 minutes (iat, exp).
type Assertion struct {
	verifier.Claims
	UserCode string `json:"user_code"`
}

// assertionSigner is who signs a brand's assertions: its keys and issuer.
type assertionSigner struct {
	keys   *verifier.KeySet
	issuer string
}

// assertionSigners are the signers of each brand's assertions: its
// configured login, or the built-in demo login.
func (p *Pages) assertionSigners() (map[string]assertionSigner, error) {
	out := map[string]assertionSigner{}
	for id, b := range p.cfg.Brands {
		var s assertionSigner
		var err error
		switch d := p.demo[id]; {
		case b.Login != nil:
			s.issuer = b.Login.Issuer
			s.keys, err = verifier.KeySetOf(b.Login.URL, b.Login.KeySet())
		case d != nil:
			s.issuer = p.demoBase(b)
			s.keys, err = verifier.KeySetOf(p.demoBase(b), d.public)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("brand %s: login keys: %w", id, err)
		}
		out[id] = s
	}
	return out, nil
}

// verifyAssertion checks a login assertion (verifier.VerifyCompact): ES256
// or RS256 by a key of the Brand's login named by its kid, its issuer, aud
// this Brand's consent page, a short life (at most 5 minutes, 30 s skew),
// and a sub, user code and jti. The error is fit to show the User.
func (p *Pages) verifyAssertion(b *brand.Brand, raw string, now time.Time) (*Assertion, error) {
	s, ok := p.signers[b.ID]
	if !ok {
		return nil, errors.New("this brand has no login")
	}
	var a Assertion
	_, err := verifier.VerifyCompact(raw, s.keys, &a, verifier.Expected{Issuer: s.issuer, Audience: p.ReturnURL(b), Time: now,
		Leeway: assertionLeeway, MaxLifetime: maxAssertionTTL})
	switch {
	case errors.Is(err, verifier.ErrUnknownKid):
		return nil, errors.New("signed by an unknown key")
	case errors.Is(err, verifier.ErrSignature):
		return nil, errors.New("bad signature")
	case errors.Is(err, verifier.ErrClaims):
		return nil, errors.New(strings.TrimPrefix(err.Error(), verifier.ErrClaims.Error()+": "))
	case err != nil:
		return nil, errors.New("not a signed assertion")
	case a.Subject == "" || a.UserCode == "" || a.ID == "":
		return nil, errors.New("sub, user_code and jti are required")
	}
	return &a, nil
}

// Consent is POST {issuer}/consent: the Brand's login returns the User
// with an assertion. Each assertion is accepted once; then the page shows
// consent, or approves at once when an active grant for (User, personal
// agent) already covers the request and the ledger's record, read first,
// does not revoke it (coverChecked).
func (p *Pages) Consent(w http.ResponseWriter, r *http.Request, b *brand.Brand) {
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
	who := b.ID + "\x00" + a.Subject
	if until, ok := p.guesses.try(who, now); !ok {
		p.cfg.Logger.WarnContext(r.Context(), "consent refused: too many unknown user codes from one account", slog.String("brand", b.ID), slog.Time("until", until))
		w.Header().Set("Retry-After", strconv.Itoa(int(until.Sub(now).Seconds())+1))
		messagePage(w, http.StatusTooManyRequests, "Too many codes tried", "Codes that were not known were entered too often from this account. Try again after "+until.Format("15:04 MST")+", with the code your agent shows you.")
		return
	}
	checked, err := p.coverChecked(r.Context(), b, a.Subject, a.UserCode, now)
	if err != nil {
		p.decisionError(w, r, err)
		return
	}
	cookie, ticket := oauth.NewSecret(""), oauth.NewSecret("ct_")
	d, cover, err := p.cfg.Store.StartConsent(store.ConsentStart{Brand: b.ID, User: a.Subject, UserCode: a.UserCode,
		AssertionID: a.Issuer + "\x00" + a.ID, AssertionExpires: a.Expiry.Time().Add(time.Minute),
		Ticket: ticket, Cookie: cookie, TicketExpires: now.Add(consentTTL), Checked: checked}, now)
	if !errors.Is(err, store.ErrNotFound) {
		p.guesses.known(who, now)
	}
	if err != nil {
		p.decisionError(w, r, err)
		return
	}
	if cover != nil {
		// PACT §5.3: consent may be skipped when a grant covers the request.
		_, err := p.cfg.Store.DecideDevice(d.UserCode, oauth.Decision{User: a.Subject, Approve: true, Scopes: d.Scopes, GrantID: cover.ID}, now)
		if err != nil {
			p.decisionError(w, r, err)
			return
		}
		// The token carries the grant, which may hold more than was asked
		// for this time: the page names all of it.
		messagePage(w, http.StatusOK, "Already allowed", "",
			"You had already allowed "+p.agentWords(d.Client)+": "+strings.Join(describe(b, b.CardOrder(cover.Scopes)), "; ")+".",
			"You can close this page and return to your agent.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: consentCookie, Value: cookie, Path: p.consentPath(b), MaxAge: int(consentTTL / time.Second),
		HttpOnly: true, Secure: p.secureCookies(), SameSite: http.SameSiteStrictMode})
	type scopeView struct{ ID, Description, Slug string }
	var scopes []scopeView
	for _, id := range b.CardOrder(d.Scopes) {
		scopes = append(scopes, scopeView{id, describe(b, []string{id})[0], slug(id)})
	}
	carried, until, unknown, err := p.carried(r.Context(), b, a.Subject, d, now)
	if err != nil {
		p.cfg.Logger.ErrorContext(r.Context(), "consent page: the agent's grants", slog.String("error", err.Error()))
		messagePage(w, http.StatusInternalServerError, "Something went wrong", "Please try again.")
		return
	}
	page(w, http.StatusOK, "consent", map[string]any{
		"Title": "Allow access to your " + b.Organization + " account?", "Brand": b.Organization, "PAOrigin": origin(d.Client), "PAName": p.cfg.AgentNames[d.Client], "PA": d.Client,
		"User": displayUser(b, a.Subject), "UserCode": d.UserCode, "Ticket": ticket, "Scopes": scopes, "Action": p.cfg.Issuer(b.ID) + "/decision",
		"Carried": carried, "CarriedUntil": until, "CarriedUnknown": unknown,
	})
}

// coverChecked applies the ledger's revocation to the grant that covers
// the request of userCode for user (store.Store.CoveringGrant), and
// returns it as checked when it is still active: consent is skipped for
// no other (store.ConsentStart.Checked). A grant the ledger records
// revoked is revoked, with the agent's other grants (LedgerRevoked), so
// the User is asked again and the grant they allow carries nothing of
// it. While the ledger's record cannot be read, nothing is checked and
// the User is asked: the page cannot tell that the grant still stands.
func (p *Pages) coverChecked(ctx context.Context, b *brand.Brand, user, userCode string, now time.Time) ([]string, error) {
	cover, err := p.cfg.Store.CoveringGrant(b.ID, user, userCode, now)
	if err != nil || cover == nil {
		return nil, err
	}
	g, _, err := LedgerRevoked(ctx, p.cfg.Store, p.cfg.Revocations, *cover, now)
	if err != nil {
		p.cfg.Logger.ErrorContext(ctx, "consent page: the ledger's revocations could not be read", slog.String("grant", cover.ID), slog.String("error", err.Error()))
		return nil, nil
	}
	if !g.Active(now) {
		return nil, nil
	}
	return []string{g.ID}, nil
}

// carried is what the User allowed the agent of d before, under grants
// still active, that d does not ask for again: a grant made from d
// replaces those and carries these, not renewed, ending when the
// earliest of them ends (store.RedeemDeviceCode, oauth.Grant.CarryOver).
// The consent page says so before the User decides. The ledger's
// revocations are applied to those grants first (LedgerRevoked): one the
// ledger records revoked is revoked, with the agent's other grants, and
// carries nothing. When the ledger's record cannot be read, unknown is
// true and nothing is listed: the page cannot tell what the agent keeps
// (the redemption reads the record again, and fails while it cannot).
func (p *Pages) carried(ctx context.Context, b *brand.Brand, user string, d oauth.DeviceAuthorization, now time.Time) (scopes []string, until string, unknown bool, err error) {
	gs, err := p.agentGrants(b, user, d, now)
	if err != nil {
		return nil, "", false, err
	}
	revoked := false
	for _, g := range gs {
		ng, _, err := LedgerRevoked(ctx, p.cfg.Store, p.cfg.Revocations, g, now)
		if err != nil {
			p.cfg.Logger.ErrorContext(ctx, "consent page: the ledger's revocations could not be read", slog.String("grant", g.ID), slog.String("error", err.Error()))
			return nil, "", true, nil
		}
		revoked = revoked || !ng.Active(now)
	}
	if revoked {
		// A revocation takes the agent's other grants with it.
		if gs, err = p.agentGrants(b, user, d, now); err != nil {
			return nil, "", false, err
		}
	}
	var held []string
	var end time.Time
	for _, g := range gs {
		kept := false
		for _, s := range g.Scopes {
			if !slices.Contains(d.Scopes, s) && !slices.Contains(held, s) {
				held, kept = append(held, s), true
			}
		}
		if kept && (end.IsZero() || g.Expires.Before(end)) {
			end = g.Expires
		}
	}
	if len(held) == 0 {
		return nil, "", false, nil
	}
	return describe(b, b.CardOrder(held)), end.Format("2 Jan 2006"), false, nil
}

// agentGrants lists user's active grants at b to the personal agent of d
// for d's agent sub.
func (p *Pages) agentGrants(b *brand.Brand, user string, d oauth.DeviceAuthorization, now time.Time) ([]oauth.Grant, error) {
	gs, err := p.cfg.Store.UserGrants(b.ID, user)
	if err != nil {
		return nil, err
	}
	var out []oauth.Grant
	for _, g := range gs {
		if g.Client == d.Client && g.AgentSub != "" && g.AgentSub == d.Sub && g.Active(now) {
			out = append(out, g)
		}
	}
	return out, nil
}

// consentPath is the path the consent cookie is sent to: the brand's
// authorization server.
func (p *Pages) consentPath(b *brand.Brand) string {
	return strings.TrimPrefix(p.cfg.Issuer(b.ID), strings.TrimRight(p.cfg.BaseURL, "/")) + "/"
}

// Decision is POST {issuer}/decision: approve with the checked scopes, or
// deny. The form's ticket must match the cookie set with it.
func (p *Pages) Decision(w http.ResponseWriter, r *http.Request, b *brand.Brand) {
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
	cookie := ""
	if c, err := r.Cookie(consentCookie); err == nil {
		cookie = c.Value
	}
	now := p.cfg.Now().UTC()
	ticket := r.PostForm.Get("ticket")
	dc := oauth.Decision{Approve: choice == "approve"}
	if dc.Approve {
		dc.Scopes = kept
		prev, found, err := p.cfg.Store.TicketStepUpExtends(b.ID, ticket, cookie, now)
		if err != nil {
			p.decisionError(w, r, err)
			return
		}
		if found && !p.stepUpChecked(w, r, prev, now) {
			return
		}
	}
	decided, err := p.cfg.Store.DecideByTicket(b.ID, ticket, cookie, dc, now)
	if err != nil {
		p.decisionError(w, r, err)
		return
	}
	p.decided(r.Context(), decided)
	http.SetCookie(w, &http.Cookie{Name: consentCookie, Value: "", Path: p.consentPath(b), MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	if !dc.Approve {
		// What the User allowed before stands: this page cannot say the
		// agent may not act at all (docs/provider.md).
		messagePage(w, http.StatusOK, "Denied", "", "You denied the request: your personal agent was not given the permissions it asked for.",
			"Anything you allowed it before is unchanged: your "+b.Organization+" account page lists it, and you can revoke it there. You can close this page.")
		return
	}
	messagePage(w, http.StatusOK, "Allowed", "", "You allowed your personal agent: "+strings.Join(describe(b, kept), "; ")+".",
		"You can close this page and return to your agent.")
}

// stepUpChecked applies the ledger's revocation to prev, the grant whose
// scopes a step-up's approval carries (store.Store.StepUpExtends), before
// the approval is recorded, so that a grant the ledger records revoked is
// not carried. When the ledger's record cannot be read it answers the
// page itself and reports false: nothing is recorded, and the form stays
// usable.
func (p *Pages) stepUpChecked(w http.ResponseWriter, r *http.Request, prev oauth.Grant, now time.Time) bool {
	if _, _, err := LedgerRevoked(r.Context(), p.cfg.Store, p.cfg.Revocations, prev, now); err != nil {
		p.cfg.Logger.ErrorContext(r.Context(), "consent decision: the ledger's revocations could not be read", slog.String("grant", prev.ID), slog.String("error", err.Error()))
		messagePage(w, http.StatusInternalServerError, "Not recorded", "Whether what you allowed your agent before still stands cannot be checked right now, so your answer was not recorded. Go back and answer again in a moment.")
		return false
	}
	return true
}

// Approve records that user, signed in with the Brand, approved the device
// authorization of userCode for scopes, as the consent page does: the
// ledger's revocation of the grant a step-up's approval carries is applied
// first, and while it cannot be read nothing is recorded.
func (p *Pages) Approve(ctx context.Context, userCode, user string, scopes []string) error {
	now := p.cfg.Now().UTC()
	prev, found, err := p.cfg.Store.StepUpExtends("", userCode, now)
	if err != nil {
		return err
	}
	if found {
		if _, _, err := LedgerRevoked(ctx, p.cfg.Store, p.cfg.Revocations, prev, now); err != nil {
			return fmt.Errorf("the ledger's revocation of grant %s could not be read: %w", prev.ID, err)
		}
	}
	_, err = p.cfg.Store.DecideDevice(userCode, oauth.Decision{User: user, Approve: true, Scopes: scopes}, now)
	return err
}

// Deny records that user, signed in with the Brand, denied the device
// authorization of userCode, as the consent page does: its refusal is
// queued for the ledger while the denied consents' share of the outbox
// has room, and otherwise counted (Config.DenialNotRecorded).
func (p *Pages) Deny(ctx context.Context, userCode, user string) error {
	decided, err := p.cfg.Store.DecideDevice(userCode, oauth.Decision{User: user}, p.cfg.Now().UTC())
	if err != nil {
		return err
	}
	p.decided(ctx, decided)
	return nil
}

// decided tells Config.DenialNotRecorded of a denial recorded without its
// refusal for the ledger.
func (p *Pages) decided(ctx context.Context, d store.Decided) {
	if d.Dropped && p.cfg.DenialNotRecorded != nil {
		p.cfg.DenialNotRecorded(ctx, d.Brand)
	}
}

// decisionError shows why a sign-in or decision cannot be taken, in the
// User's words; anything else is logged and shown as a failure.
func (p *Pages) decisionError(w http.ResponseWriter, r *http.Request, err error) {
	if msg := decisionMessage(err); msg != "" {
		messagePage(w, http.StatusBadRequest, "This request cannot be answered", msg)
		return
	}
	p.cfg.Logger.ErrorContext(r.Context(), "consent decision", slog.String("error", err.Error()))
	messagePage(w, http.StatusInternalServerError, "Something went wrong", "Please try again.")
}

// decisionMessage is what to tell the User about err, or "" when it is not
// theirs to fix.
func decisionMessage(err error) string {
	const again = ": start again from the link your agent shows you"
	var te *oauth.TransitionError
	switch {
	case errors.As(err, &te) && te.From == oauth.Expired:
		return "this request has expired: ask your agent to start again"
	case errors.As(err, &te):
		return "this request was already answered"
	case errors.Is(err, store.ErrNotFound):
		return "that code is not known: check the code your agent shows you"
	case errors.Is(err, store.ErrAssertionUsed):
		return "this sign-in was already used: sign in again"
	case errors.Is(err, store.ErrTicket):
		return "this page has expired or was already answered" + again
	case errors.Is(err, store.ErrTicketExpired):
		return "this page has expired" + again
	case errors.Is(err, store.ErrTicketBrowser):
		return "this form does not belong to this browser session" + again
	case errors.Is(err, oauth.ErrNotRequested):
		return err.Error()
	case errors.Is(err, oauth.ErrNothingApproved):
		return "approve at least one permission, or deny"
	}
	return ""
}
