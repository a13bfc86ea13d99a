package pact

import (
	"github.com/pactledger/pactledger/pact/a2a"
	"github.com/pactledger/pactledger/pact/client"
)

// The personal agent's side lives in package client (linked by personal
// agents without the Provider); these names keep it at hand.
type (
	Client      = client.Client
	Card        = client.Card
	DeviceFlow  = client.DeviceFlow
	AuthServer  = client.AuthServer
	DeviceStart = client.DeviceStart
	TokenSet    = client.TokenSet
	OAuthError  = client.OAuthError
	SendError   = client.SendError
	SendReply   = client.SendReply
	Task        = client.Task
	Receipt     = client.Receipt
	Message     = a2a.Message
)

// Errors of the personal agent's side.
var (
	ErrDenied    = client.ErrDenied
	ErrNoReceipt = client.ErrNoReceipt
)

// ContentType is the media type of every A2A response (PACT §2).
const ContentType = a2a.ContentType

// ReplyText joins the text parts of a message.
func ReplyText(m *Message) string { return client.ReplyText(m) }
