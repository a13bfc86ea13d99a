// Package agent is a brand's support agent as the Provider calls it: one
// Turn in, one Reply out. Scripted is the default agent, an interpreter of
// the brand file's records, tools and intents; a real (LLM) agent
// implements the same interface.
package agent

import (
	"context"
	"encoding/json"

	"github.com/pactledger/pactledger/pact/brand"
)

// Turn is one user message to a brand agent, with who is asking.
type Turn struct {
	Brand *brand.Brand
	// PA and Sub identify the User (PACT §3.3: not a Brand account).
	PA, Sub string
	Text    string
	// State is the agent's state for the context from the previous turn.
	State json.RawMessage
	// User is the Brand user a delegation token lets the agent act as, and
	// Scopes what it allows (PACT §5.5); empty under §3 alone.
	User   string
	Scopes []string
	// Records reads and changes the Brand's records.
	Records RecordBook
}

// RecordBook is the Brand's records as the agent sees them: the brand's
// data (or its source) with the changes made since.
type RecordBook interface {
	// Get returns the record of type rt with id, or nil when there is none.
	Get(ctx context.Context, rt *brand.RecordType, id string) (brand.Record, error)
	// Set changes fields of a record Get returned.
	Set(ctx context.Context, rt *brand.RecordType, rec brand.Record, changes map[string]string) error
}

// Action is one tool the agent ran, with its exact args JSON, for the
// receipt (argsHash) and the application action log.
type Action struct {
	Tool     string
	Target   string
	ArgsJSON string
}

// Refusal is an account action the agent refused because the request
// carried no delegation (PACT §3 alone).
type Refusal struct {
	Tool   string
	Target string
}

// Reply is an agent's answer and its new state for the context.
type Reply struct {
	Text  string
	State json.RawMessage
	// Close ends the conversation (later messages get UNSUPPORTED_OPERATION).
	Close bool
	// Actions the turn ran and the scopes they used (delegated turns).
	Actions    []Action
	ScopesUsed []string
	// NeedScopes asks for a step-up: the turn needs these scopes, which the
	// token lacks or, with the brand's withoutToken: stepUp, no token was
	// sent for (PACT §5.5).
	NeedScopes []string
	// Refused is an account action refused for want of a delegation, or of
	// a scope the delegation lacks; the Provider reports it to the ledger
	// as a refusal.
	Refused *Refusal
}

// Agent is a brand's support agent.
type Agent interface {
	Respond(ctx context.Context, t Turn) (Reply, error)
}
