package pact

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/pactledger/pactledger/pact/a2a"
)

// The A2A wire types live in package a2a; these names keep them at hand.
type (
	Part               = a2a.Part
	Message            = a2a.Message
	SendMessageRequest = a2a.SendMessageRequest
	ReceiptClaims      = a2a.ReceiptClaims
	ReceiptAction      = a2a.ReceiptAction
)

// ContentType is the media type of every A2A response (PACT §2).
const ContentType = a2a.ContentType

// A2A error reasons of PACT §6.
const (
	ReasonInvalidParams     = a2a.ReasonInvalidParams
	ReasonContentType       = a2a.ReasonContentType
	ReasonUnsupported       = a2a.ReasonUnsupported
	ReasonPushNotSupported  = a2a.ReasonPushNotSupported
	ReasonTaskNotFound      = a2a.ReasonTaskNotFound
	ReasonInternal          = a2a.ReasonInternal
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
