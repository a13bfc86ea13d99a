package brandlogin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/store"
)

// grantView is one grant on the account page.
type grantView struct {
	ID, Agent, Created, Status string
	Scopes                     []string
	Active                     bool
}

// grantsPage lists the personal agents the signed-in User allowed, with a
// Revoke button each.
func (p *Pages) grantsPage(w http.ResponseWriter, r *http.Request, b *brand.Brand) {
	s, _ := p.session(r, b)
	if s == nil {
		p.renderLogin(w, r, b, "", "", "", http.StatusOK)
		return
	}
	gs, err := p.cfg.Store.UserGrants(b.ID, s.User)
	if err != nil {
		p.cfg.Logger.ErrorContext(r.Context(), "grants page", slog.String("error", err.Error()))
		messagePage(w, http.StatusInternalServerError, "Something went wrong", "Please try again.")
		return
	}
	now := p.cfg.Now()
	var views []grantView
	for _, g := range gs {
		// A grant the ledger records revoked is shown, and is, revoked.
		if ng, _, err := LedgerRevoked(r.Context(), p.cfg.Store, p.cfg.Revocations, g, now); err != nil {
			p.cfg.Logger.ErrorContext(r.Context(), "grants page: the ledger's revocations could not be read", slog.String("error", err.Error()))
		} else {
			g = ng
		}
		v := grantView{ID: g.ID, Agent: p.agentWords(g.Client), Created: g.Created.Format("2 Jan 2006 15:04 MST"), Scopes: describe(b, g.Scopes), Active: true,
			Status: "until " + g.Expires.Format("2 Jan 2006")}
		switch {
		case g.ReplacedBy != "":
			v.Active, v.Status = false, "replaced by a newer grant "+g.Revoked.Format("2 Jan 2006 15:04 MST")
		case !g.Revoked.IsZero():
			v.Active, v.Status = false, "revoked "+g.Revoked.Format("2 Jan 2006 15:04 MST")
		case now.After(g.Expires):
			v.Active, v.Status = false, "expired"
		}
		views = append(views, v)
	}
	page(w, http.StatusOK, "grants", map[string]any{"Title": b.Organization + ": personal agents", "Brand": b.Organization,
		"SignedInAs": displayUser(b, s.User), "Grants": views, "CSRF": csrf(s, "revoke"), "Action": p.demoBase(b) + "/grants/revoke",
		"LogoutAction": p.demoBase(b) + "/logout", "LogoutCSRF": csrf(s, "logout")})
}

func (p *Pages) revokeSubmit(w http.ResponseWriter, r *http.Request, b *brand.Brand) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	s, _ := p.session(r, b)
	if s == nil {
		http.Redirect(w, r, p.demoBase(b)+"/login", http.StatusSeeOther)
		return
	}
	if r.ParseForm() != nil || !checkCSRF(s, "revoke", r.PostForm.Get("csrf")) {
		messagePage(w, http.StatusForbidden, "Request refused", "This form has expired. Open your account page again.")
		return
	}
	err := RevokeGrant(p.cfg.Store, b.ID, s.User, r.PostForm.Get("grant"), p.cfg.Now().UTC())
	switch {
	case errors.Is(err, store.ErrNotFound):
		messagePage(w, http.StatusBadRequest, "Not revoked", "There is no such grant on your account.")
		return
	case err != nil:
		p.cfg.Logger.ErrorContext(r.Context(), "revoke grant", slog.String("error", err.Error()))
		messagePage(w, http.StatusInternalServerError, "Something went wrong", "Please try again.")
		return
	}
	http.Redirect(w, r, p.demoBase(b)+"/grants", http.StatusSeeOther)
}

// RevokeGrant revokes user's grant id at brand: its delegation and refresh
// tokens stop working, and the revocation is queued for the ledger. Every
// other active grant of the user to the same personal agent (for the same
// agent sub) is revoked with it: the User stops the agent
// (store.Store.RevokeGrant). store.ErrNotFound: the user has no such grant.
func RevokeGrant(st *store.Store, brand, user, id string, now time.Time) error {
	return st.RevokeGrant(brand, user, id, "revoked by the user "+user+" at "+brand, now)
}

// LedgerRevoked applies to g the revocation rs, the ledger's record,
// holds for it when one has taken effect by now (oauth.Revocations.Ends):
// the grant is revoked at the Provider as of the ledger's time, with the
// agent's other grants as a User's revocation revokes them
// (store.Store.RevokeRecorded). An admin's revocation the ledger holds of
// a grant whose scopes g carries (oauth.Grant.Carried: one it replaced
// or extends, and those they carried theirs from) ends g too, as a
// User's revocation of that grant does (store.Store.RevokeCarried): an
// admin revokes the grant a disputed receipt names, which may have been
// replaced since. It returns the grant as it now stands and the time the
// ledger's revocation took effect (zero when none did). A revocation as
// of a past time stops the grant's use from now on: what the Provider
// served before it learnt of it stays served.
func LedgerRevoked(ctx context.Context, st *store.Store, rs oauth.Revocations, g oauth.Grant, now time.Time) (oauth.Grant, time.Time, error) {
	at, ok, err := rs.Ends(ctx, &g, now)
	if err != nil {
		return g, time.Time{}, err
	}
	if ok {
		ng, err := st.RevokeRecorded(g.ID, at, "revoked in the ledger as of "+at.UTC().Format(time.RFC3339), now.UTC())
		if err != nil {
			return g, time.Time{}, err
		}
		return ng, at, nil
	}
	if rs == nil || !g.Active(now) {
		return g, time.Time{}, nil
	}
	from, at, err := carriedRevoked(ctx, rs, g, now)
	if err != nil || from == "" {
		return g, time.Time{}, err
	}
	ng, err := st.RevokeCarried(g.ID, "grant "+from+", whose scopes it carries, is revoked in the ledger as of "+at.UTC().Format(time.RFC3339), now.UTC())
	if err != nil {
		return g, time.Time{}, err
	}
	return ng, at, nil
}

// carriedRevoked finds a grant whose scopes g carries (oauth.Grant.Carried)
// whose admin's revocation rs records has taken effect by now
// (Recorded.Admin): its id and that time, or "" when none has.
func carriedRevoked(ctx context.Context, rs oauth.Revocations, g oauth.Grant, now time.Time) (string, time.Time, error) {
	for _, id := range g.Carried() {
		r, err := rs(ctx, id)
		switch {
		case err != nil:
			return "", time.Time{}, err
		case !r.Admin.IsZero() && !now.Before(r.Admin):
			return id, r.Admin, nil
		}
	}
	return "", time.Time{}, nil
}
