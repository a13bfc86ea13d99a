package oauth

// Error codes of RFC 6749 §5.2 and RFC 8628 §3.5.
const (
	InvalidRequest       = "invalid_request"
	InvalidClient        = "invalid_client"
	InvalidGrant         = "invalid_grant"
	InvalidScope         = "invalid_scope"
	UnsupportedGrantType = "unsupported_grant_type"
	ServerError          = "server_error"
	AuthorizationPending = "authorization_pending"
	SlowDown             = "slow_down"
	AccessDenied         = "access_denied"
	ExpiredToken         = "expired_token"
)

// Error is an OAuth error answer (RFC 6749 §5.2): a code and a
// description for the client's developer.
type Error struct {
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

// NewError returns the error with code and description.
func NewError(code, desc string) *Error { return &Error{Code: code, Description: desc} }

func (e *Error) Error() string { return e.Code + ": " + e.Description }
