package provider

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/pactledger/pactledger/pact/a2a"
)

// send is message:send (PACT §4).
func (s *Server) send(w http.ResponseWriter, r *http.Request, rq *request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		writeError(w, newErr(a2a.ReasonInvalidParams, "request body unreadable or larger than "+strconv.FormatInt(s.cfg.MaxBodyBytes, 10)+" bytes"))
		return
	}
	msg, text, aerr := parseSend(body)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	out, aerr := s.turn(r.Context(), rq, msg, text)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	w.Header().Set("Content-Type", a2a.ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// parseSend applies the request rules of PACT §4.1, in order: a bad body,
// role, part kinds (before blank text), text, taskId, messageId.
func parseSend(body []byte) (*a2a.Message, string, *a2aError) {
	var req a2a.SendMessageRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, "", newErr(a2a.ReasonInvalidParams, "request body is not a SendMessageRequest")
	}
	m := req.Message
	if m == nil {
		return nil, "", newErr(a2a.ReasonInvalidParams, "message is required")
	}
	if m.Role != "ROLE_USER" {
		return nil, "", newErr(a2a.ReasonInvalidParams, "message role must be ROLE_USER")
	}
	var texts []string
	for _, part := range m.Parts {
		if !part.TextOnly() {
			return nil, "", newErr(a2a.ReasonContentType, "only text parts are supported")
		}
		if strings.TrimSpace(*part.Text) != "" {
			texts = append(texts, *part.Text)
		}
	}
	if len(texts) == 0 {
		return nil, "", newErr(a2a.ReasonInvalidParams, "message needs at least one non-blank text part")
	}
	if m.TaskID != "" {
		return nil, "", taskErr(m.TaskID)
	}
	if m.MessageID == "" || len(m.MessageID) > 256 {
		return nil, "", newErr(a2a.ReasonInvalidParams, "messageId is required (up to 256 characters)")
	}
	if len(m.ContextID) > 256 {
		return nil, "", newErr(a2a.ReasonInvalidParams, "Unknown contextId")
	}
	return m, strings.Join(texts, "\n"), nil
}
