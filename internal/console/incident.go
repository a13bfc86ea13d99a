package console

import (
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

type incidentsView struct {
	State     string // open, closed or all
	Incidents []*ledgerv1.Incident
	Open      int
	Closed    int
	Next      string
	First     string
}

func (h *handler) incidents(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	state := q.Get("state")
	if state != "closed" && state != "all" {
		state = "open"
	}
	tok := bound(q.Get("page"))
	ctx, cancel := h.call(r, s)
	defer cancel()
	resp, err := h.api.ListIncidents(ctx, &ledgerv1.ListIncidentsRequest{PageSize: 200, PageToken: tok})
	h.audit(r, s, "view incidents", err, slog.String("state", state))
	if err != nil {
		h.apiError(w, r, s, err)
		return
	}
	v := incidentsView{State: state}
	for _, inc := range resp.GetIncidents() {
		if inc.GetOpen() {
			v.Open++
		} else {
			v.Closed++
		}
		if state == "all" || inc.GetOpen() == (state == "open") {
			v.Incidents = append(v.Incidents, inc)
		}
	}
	if t := resp.GetNextPageToken(); t != "" {
		v.Next = Prefix + "incidents?state=" + state + "&page=" + urlQuery(t)
	}
	if tok != "" {
		v.First = Prefix + "incidents?state=" + state
	}
	h.render(w, r, s, http.StatusOK, "incidents", "Incidents", v)
}

var incidentID = regexp.MustCompile(`^INC-[0-9]{1,18}$`)

type incidentView struct {
	Incident *ledgerv1.GetIncidentResponse
}

func (h *handler) incident(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if !incidentID.MatchString(id) {
		h.render(w, r, s, http.StatusNotFound, "error", "Not found", errorView{Title: "Not found", Message: "An incident id looks like INC-12.", Back: Prefix + "incidents"})
		return
	}
	ctx, cancel := h.call(r, s)
	defer cancel()
	resp, err := h.api.GetIncident(ctx, &ledgerv1.GetIncidentRequest{Id: id})
	h.audit(r, s, "view incident", err, slog.String("incident", id))
	if err != nil {
		h.apiError(w, r, s, err)
		return
	}
	h.render(w, r, s, http.StatusOK, "incident", id, incidentView{Incident: resp})
}

// closeIncident closes an incident (CloseIncident): admin keys; the API
// refuses anyone else.
func (h *handler) closeIncident(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	note := strings.TrimSpace(r.PostForm.Get("note"))
	if !incidentID.MatchString(id) || note == "" || len(note) > maxNote {
		h.render(w, r, s, http.StatusBadRequest, "error", "Bad form", errorView{Title: "The incident was not closed",
			Message: fmt.Sprintf("Say how it was resolved, in at most %d bytes (that many letters of English, about half as many accented or Cyrillic, a third as many Chinese or Japanese).", maxNote), Back: Prefix + "incidents/" + id})
		return
	}
	ctx, cancel := h.call(r, s)
	defer cancel()
	_, err := h.api.CloseIncident(ctx, &ledgerv1.CloseIncidentRequest{Id: id, Note: note})
	h.audit(r, s, "close incident", err, slog.String("incident", id))
	if err != nil {
		h.apiError(w, r, s, err)
		return
	}
	http.Redirect(w, r, Prefix+"incidents/"+id, http.StatusSeeOther)
}
