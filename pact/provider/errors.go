package provider

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/pactledger/pactledger/pact/a2a"
)

// The A2A error envelope of PACT §6.
const (
	errorInfoType            = "type.googleapis.com/google.rpc.ErrorInfo"
	errorDomain              = "a2a-protocol.org"
	statusInvalidArgument    = "INVALID_ARGUMENT"
	statusFailedPrecondition = "FAILED_PRECONDITION"
)

// a2aError is an A2A error: the §6 reason, with the Provider's own
// explanation and the task id it concerns, when there is one.
type a2aError struct {
	reason string
	detail string
	taskID string
	// retryAfter, when set, is sent as Retry-After (seconds): the request
	// may succeed later as it is.
	retryAfter int
}

var reasonStatus = map[string]struct {
	code   int
	status string
}{
	a2a.ReasonInvalidParams:    {http.StatusBadRequest, statusInvalidArgument},
	a2a.ReasonContentType:      {http.StatusBadRequest, statusInvalidArgument},
	a2a.ReasonUnsupported:      {http.StatusBadRequest, statusFailedPrecondition},
	a2a.ReasonPushNotSupported: {http.StatusBadRequest, statusFailedPrecondition},
	a2a.ReasonTaskNotFound:     {http.StatusNotFound, "NOT_FOUND"},
	a2a.ReasonInternal:         {http.StatusInternalServerError, "INTERNAL"},
}

// conventionalMessages are the fixed messages the A2A SDKs give these
// reasons, so that clients and conformance tests written against them read
// ours the same way. INVALID_PARAMS has none: its message says what was
// invalid (PACT §6: "Unknown contextId").
var conventionalMessages = map[string]string{
	a2a.ReasonContentType:      "Incompatible content types",
	a2a.ReasonUnsupported:      "This operation is not supported",
	a2a.ReasonPushNotSupported: "Push Notification is not supported",
	a2a.ReasonTaskNotFound:     "Task not found",
	a2a.ReasonInternal:         "Internal error",
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

// errInvalidToken is not an A2A error: a delegation token found bad after
// authentication (its grant ended while the turn ran) is answered as one
// found bad before it, a bare 401 (PACT §5.5).
var errInvalidToken = &a2aError{detail: "the delegation token's grant has ended"}

func newErr(reason, detail string) *a2aError { return &a2aError{reason: reason, detail: detail} }

// internalErr is INTERNAL, saying nothing of the cause (which is logged).
func internalErr(detail string) *a2aError { return newErr(a2a.ReasonInternal, detail) }

// taskErr is TASK_NOT_FOUND for a task id.
func taskErr(id string) *a2aError {
	return &a2aError{reason: a2a.ReasonTaskNotFound, detail: "there are no tasks to look up here", taskID: id}
}

// writeError writes the AIP-193 envelope of PACT §6: the conventional
// message, and an ErrorInfo whose metadata keeps the Provider's reason in
// words (detail) and the task id.
func writeError(w http.ResponseWriter, e *a2aError) {
	if e == errInvalidToken {
		w.Header().Set("WWW-Authenticate", `Bearer realm="a2a", error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	rs := reasonStatus[e.reason]
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
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
	w.Header().Set("Content-Type", a2a.ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
