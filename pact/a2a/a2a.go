// Package a2a holds the A2A wire types of the HTTP+JSON binding as PACT
// 1.0 narrows them (§2, §4, §6) and the receipt claims of §5.6: what a
// Provider and a personal agent exchange. It has no server or storage
// side, so a personal agent links it alone.
package a2a

import "encoding/json"

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

// TextOnly reports whether the part is a plain text part: a text and no
// other content (raw, url, data, file).
func (p Part) TextOnly() bool {
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
	ReasonInvalidParams    = "INVALID_PARAMS"
	ReasonContentType      = "CONTENT_TYPE_NOT_SUPPORTED"
	ReasonUnsupported      = "UNSUPPORTED_OPERATION"
	ReasonPushNotSupported = "PUSH_NOTIFICATION_NOT_SUPPORTED"
	ReasonTaskNotFound     = "TASK_NOT_FOUND"
	ReasonInternal         = "INTERNAL"
)

// ReceiptClaims are a receipt's claims (PACT §5.6).
type ReceiptClaims struct {
	GrantID    string          `json:"grantId"`
	User       string          `json:"user"`
	PA         string          `json:"pa"`
	Brand      string          `json:"brand"`
	ScopesUsed []string        `json:"scopesUsed"`
	Actions    []ReceiptAction `json:"actions"`
	TS         string          `json:"ts"`
}

// ReceiptAction is one action a receipt lists.
type ReceiptAction struct {
	Tool     string `json:"tool"`
	ArgsHash string `json:"argsHash,omitempty"`
}
