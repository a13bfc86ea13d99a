package brandlogin

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/pactledger/pactledger/pact/brand"
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
