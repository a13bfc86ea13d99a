package pact

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// ContentType is the media type of every A2A response (PACT §2).
const ContentType = "application/a2a+json"

// Part is a message part. Only text parts are accepted (PACT §4.1); other
// kinds are kept raw to detect them.
type Part struct {
	Text  *string                    `json:"text,omitempty"`
	Other map[string]json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps every key, to tell text parts from the others.
func (p *Part) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	p.Other = m
	if raw, ok := m["text"]; ok {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		p.Text = &s
	}
	return nil
}

// MarshalJSON writes a text part.
func (p Part) MarshalJSON() ([]byte, error) {
	if p.Text == nil {
		return []byte(`{}`), nil
	}
	return json.Marshal(map[string]string{"text": *p.Text})
}

// kindOK reports whether the part is a plain text part: a text and no other
// content (raw, url, data, file).
func (p Part) kindOK() bool {
	if p.Text == nil {
		return false
	}
	for k := range p.Other {
		switch k {
		case "text", "metadata", "mediaType":
		default:
			return false
		}
	}
	return true
}

// Message is an A2A message.
type Message struct {
	MessageID string          `json:"messageId"`
	ContextID string          `json:"contextId,omitempty"`
	TaskID    string          `json:"taskId,omitempty"`
	Role      string          `json:"role"`
	Parts     []Part          `json:"parts"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// SendMessageRequest is the body of message:send.
type SendMessageRequest struct {
	Message       *Message        `json:"message"`
	Configuration json.RawMessage `json:"configuration,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
}

// A2A error reasons of PACT §6.
const (
	ReasonInvalidParams     = "INVALID_PARAMS"
	ReasonContentType       = "CONTENT_TYPE_NOT_SUPPORTED"
	ReasonUnsupported       = "UNSUPPORTED_OPERATION"
	ReasonPushNotSupported  = "PUSH_NOTIFICATION_NOT_SUPPORTED"
	ReasonTaskNotFound      = "TASK_NOT_FOUND"
	ReasonInternal          = "INTERNAL"
	errorInfoType           = "type.googleapis.com/google.rpc.ErrorInfo"
	errorDomain             = "a2a-protocol.org"
	statusInvalidArgument   = "INVALID_ARGUMENT"
	statusFailedPrecondtion = "FAILED_PRECONDITION"
)

// a2aError is an A2A error: the §6 reason, with the Provider's own
// explanation and the task id it concerns, when there is one.
type a2aError struct {
	reason string
	detail string
	taskID string
}

var reasonStatus = map[string]struct {
	code   int
	status string
}{
	ReasonInvalidParams:    {http.StatusBadRequest, statusInvalidArgument},
	ReasonContentType:      {http.StatusBadRequest, statusInvalidArgument},
	ReasonUnsupported:      {http.StatusBadRequest, statusFailedPrecondtion},
	ReasonPushNotSupported: {http.StatusBadRequest, statusFailedPrecondtion},
	ReasonTaskNotFound:     {http.StatusNotFound, "NOT_FOUND"},
	ReasonInternal:         {http.StatusInternalServerError, "INTERNAL"},
}

// conventionalMessages are the fixed messages the A2A SDKs give these
// reasons, so that clients and conformance tests written against them read
// ours the same way. INVALID_PARAMS has none: its message says what was
// invalid (PACT §6: "Unknown contextId").
var conventionalMessages = map[string]string{
	ReasonContentType:      "Incompatible content types",
	ReasonUnsupported:      "This operation is not supported",
	ReasonPushNotSupported: "Push Notification is not supported",
	ReasonTaskNotFound:     "Task not found",
	ReasonInternal:         "Internal error",
}

func (e *a2aError) Error() string { return e.reason + ": " + e.detail }

// message is the error's message: the conventional one for its reason, with
// the task id after a colon where one was given, else the detail.
func (e *a2aError) message() string {
	m, ok := conventionalMessages[e.reason]
	if !ok {
		return e.detail
	}
	if e.taskID != "" {
		m += ": " + e.taskID
	}
	return m
}

func newErr(reason, detail string) *a2aError { return &a2aError{reason: reason, detail: detail} }

// taskErr is TASK_NOT_FOUND for a task id.
func taskErr(id string) *a2aError {
	return &a2aError{reason: ReasonTaskNotFound, detail: "there are no tasks to look up here", taskID: id}
}

// writeError writes the AIP-193 envelope of PACT §6: the conventional
// message, and an ErrorInfo whose metadata keeps the Provider's reason in
// words (detail) and the task id.
func writeError(w http.ResponseWriter, e *a2aError) {
	rs := reasonStatus[e.reason]
	meta := map[string]string{"detail": e.detail}
	if e.taskID != "" {
		meta["taskId"] = e.taskID
	}
	body := map[string]any{"error": map[string]any{
		"code":    rs.code,
		"status":  rs.status,
		"message": e.message(),
		"details": []map[string]any{{"@type": errorInfoType, "reason": e.reason, "domain": errorDomain, "metadata": meta}},
	}}
	writeA2A(w, rs.code, body)
}

func writeA2A(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":{"code":500,"status":"INTERNAL","message":"encoding failed"}}`)
	}
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
