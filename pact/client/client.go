// Package client is a personal agent's side of PACT 1.0: it fetches Agent
// Cards, sends messages with a fresh personal-agent JWT (§2–§4), and, with
// the Delegated profile, runs the device flow, sends with the delegation
// token and verifies receipts (§5). It links no Provider code: no store,
// no password hashing.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/pactledger/pactledger/pact/a2a"
)

// deviceGrant is the device code grant type (RFC 8628 §3.4).
const deviceGrant = "urn:ietf:params:oauth:grant-type:device_code"

// newID is a random message id (UUID form).
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Card is the part of an Agent Card a personal agent needs.
type Card struct {
	Name string `json:"name"`
	// Provider is the organization behind the agent (A2A AgentProvider).
	Provider struct {
		Organization string `json:"organization"`
		URL          string `json:"url"`
	} `json:"provider"`
	SupportedInterfaces []struct {
		URL             string `json:"url"`
		ProtocolBinding string `json:"protocolBinding"`
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"supportedInterfaces"`
	SecuritySchemes map[string]securityScheme `json:"securitySchemes"`
}

// Organization is the business the card's agent speaks for, which the User
// signs in with: the card's provider.organization, else its name.
func (c *Card) Organization() string {
	if c.Provider.Organization != "" {
		return c.Provider.Organization
	}
	return c.Name
}

// Interface returns the URL of the HTTP+JSON 1.0 interface, chosen by
// binding and version, not by position (PACT §2.1).
func (c *Card) Interface() (string, error) {
	for _, i := range c.SupportedInterfaces {
		if i.ProtocolBinding == "HTTP+JSON" && i.ProtocolVersion == "1.0" && i.URL != "" {
			return i.URL, nil
		}
	}
	return "", errors.New("the card lists no HTTP+JSON 1.0 interface")
}

// Client is a personal agent's side of PACT: it fetches cards and sends
// messages with a fresh personal-agent JWT from Token (§2–§4), and, with
// the Delegated profile, gets delegation tokens and verifies receipts (§5).
type Client struct {
	HTTP *http.Client
	// Token returns a fresh personal-agent JWT for sub.
	Token func(sub string) (string, error)
	// Issuer is the personal agent's issuer URL: its OAuth client_id.
	Issuer string
	// Providers are the origins (scheme://host[:port]) of the Provider
	// whose audience the JWTs from Token name. A request that carries one
	// (message:send, the OAuth calls) goes only to a URL at one of them:
	// anywhere else would get a token the Provider accepts (PACT §3.1: the
	// audience is one value per Provider, never derived from a card).
	// Empty, no such request is sent anywhere (ErrNoProviders).
	Providers []string
	// Now, when set, is the time receipts are checked at; nil is time.Now.
	Now func() time.Time
	// OnRateLimited, when set, is told before each wait for a request the
	// Brand answered 429: the wait its Retry-After asks for and the retry
	// about to come (1 to RateLimitRetries).
	OnRateLimited func(wait time.Duration, retry int)
	// Sleep, when set, waits d or until ctx ends (returning its error):
	// between polls of the token endpoint and before a retry after a 429.
	// Nil waits on a timer; tests set it so as not to wait.
	Sleep func(ctx context.Context, d time.Duration) error

	clientState
}

// FetchCard fetches and decodes an Agent Card.
func (c *Client) FetchCard(ctx context.Context, url string) (*Card, error) {
	var card Card
	if err := c.getJSON(ctx, url, 1<<20, &card); err != nil {
		return nil, fmt.Errorf("fetch card: %w", err)
	}
	return &card, nil
}

// getJSON fetches u and decodes at most limit bytes of its JSON into out.
func (c *Client) getJSON(ctx context.Context, u string, limit int64, out any) error {
	res, err := c.do(ctx, c.http(), func() (*http.Request, error) { return http.NewRequestWithContext(ctx, http.MethodGet, u, nil) })
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return &HTTPError{Method: http.MethodGet, URL: u, Status: res.StatusCode, Body: strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD"))}
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, limit)).Decode(out); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// HTTPError is an answer other than 200 to a GET: its status, and the
// start of its body, which may say why.
type HTTPError struct {
	Method, URL string
	Status      int
	Body        string
}

func (e *HTTPError) Error() string { return fmt.Sprintf("%s %s: HTTP %d", e.Method, e.URL, e.Status) }

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// OriginError: a request that would carry the personal-agent JWT is for a
// URL outside the Provider's origins (Client.Providers), so it is not
// sent.
type OriginError struct {
	URL       string
	Providers []string
}

func (e *OriginError) Error() string {
	return fmt.Sprintf("%s is not at the Provider this agent signs its requests for (%s): nothing signed is sent there", e.URL, strings.Join(e.Providers, ", "))
}

// Origin is the origin of an http or https URL (RFC 6454): its scheme and
// host in lower case, with the port unless it is the scheme's default.
func Origin(u string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(p.Scheme)
	if scheme != "http" && scheme != "https" || p.Host == "" || p.User != nil {
		return "", fmt.Errorf("%q is not an http or https URL of a host", u)
	}
	host, port := strings.ToLower(p.Hostname()), p.Port()
	if port == "" || scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		if strings.Contains(host, ":") {
			return scheme + "://[" + host + "]", nil
		}
		return scheme + "://" + host, nil
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host + ":" + port, nil
}

// ErrNoProviders: the Client names no Provider (Client.Providers), so it
// sends no request carrying the personal-agent JWT: it cannot tell where
// the JWT's audience holds.
var ErrNoProviders = errors.New("the client names no Provider (Client.Providers) its personal-agent JWTs are for, so it sends nothing signed")

// AtProvider returns nil when u is at one of the Provider's origins,
// where a request may carry the personal-agent JWT, an *OriginError when
// it is not, and ErrNoProviders when Providers is empty.
func (c *Client) AtProvider(u string) error {
	if len(c.Providers) == 0 {
		return ErrNoProviders
	}
	o, err := Origin(u)
	if err == nil {
		for _, p := range c.Providers {
			if po, perr := Origin(p); perr == nil && po == o {
				return nil
			}
		}
	}
	return &OriginError{URL: u, Providers: slices.Clone(c.Providers)}
}

// ErrRedirect: a request carrying the agent's tokens was answered with a
// redirect, which is not followed: the tokens would go where the answer
// points (Go drops Authorization on a redirect to another host, but not
// the delegation token, nor the body).
var ErrRedirect = errors.New("the answer is a redirect, which a request carrying this agent's tokens does not follow")

// signedHTTP is c.http() refusing to follow redirects: for requests that
// carry the personal-agent JWT or the delegation token. A GET for a card
// or keys carries neither and may follow them (PACT §2.1: a Brand's
// domain may redirect to the Provider's card).
func (c *Client) signedHTTP() *http.Client {
	hc := *c.http()
	hc.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		return fmt.Errorf("%w (to %s)", ErrRedirect, req.URL.Redacted())
	}
	return &hc
}

// SendError is a failed message:send: the HTTP status and, for A2A errors,
// the §6 reason, the message, and the Provider's explanation from the
// ErrorInfo's metadata (detail), when it gives one; and the wait its
// Retry-After asks for before trying again, when it sends one.
type SendError struct {
	Status     int
	Reason     string
	Message    string
	Detail     string
	RetryAfter time.Duration
}

func (e *SendError) Error() string {
	switch {
	case e.Reason == "":
		return fmt.Sprintf("HTTP %d", e.Status)
	case e.Detail != "" && e.Detail != e.Message:
		return fmt.Sprintf("HTTP %d %s: %s (%s)", e.Status, e.Reason, e.Message, e.Detail)
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Reason, e.Message)
}

// Send sends text as sub to the interface URL under PACT §3 alone,
// continuing contextID when it is set, with messageID (a new one when
// empty). It returns the message, or the step-up task of a Brand that
// answers an account action asked without a delegation token with one
// (§5.5).
func (c *Client) Send(ctx context.Context, iface, sub, contextID, messageID, text string) (*SendReply, error) {
	raw, err := c.send(ctx, iface, sub, contextID, messageID, text, "")
	if err != nil {
		return nil, err
	}
	return decodeReply(raw)
}

// send posts message:send, with a delegation token when one is given, and
// returns the 200 body.
func (c *Client) send(ctx context.Context, iface, sub, contextID, messageID, text, delegation string) ([]byte, error) {
	if err := c.AtProvider(iface); err != nil {
		return nil, err
	}
	if messageID == "" {
		messageID = newID()
	}
	t := text
	body, err := json.Marshal(a2a.SendMessageRequest{Message: &a2a.Message{MessageID: messageID, ContextID: contextID, Role: "ROLE_USER", Parts: []a2a.Part{{Text: &t}}}})
	if err != nil {
		return nil, err
	}
	res, err := c.do(ctx, c.signedHTTP(), func() (*http.Request, error) {
		tok, err := c.Token(sub)
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, iface+"/message:send", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
		if delegation != "" {
			req.Header.Set("X-A2A-User-Delegation", "Bearer "+delegation)
		}
		return req, nil
	})
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		se := &SendError{Status: res.StatusCode}
		var env struct {
			Error struct {
				Message string `json:"message"`
				Details []struct {
					Reason   string            `json:"reason"`
					Metadata map[string]string `json:"metadata"`
				} `json:"details"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &env) == nil && len(env.Error.Details) > 0 {
			se.Reason, se.Message, se.Detail = env.Error.Details[0].Reason, env.Error.Message, env.Error.Details[0].Metadata["detail"]
		}
		if res.StatusCode == http.StatusUnauthorized {
			se.Message = res.Header.Get("WWW-Authenticate")
		}
		if v := res.Header.Get("Retry-After"); v != "" {
			se.RetryAfter = retryAfter(v, time.Now())
		}
		return nil, se
	}
	return raw, nil
}

// ReplyText joins the text parts of a message.
func ReplyText(m *a2a.Message) string {
	var b bytes.Buffer
	for i, p := range m.Parts {
		if p.Text == nil {
			continue
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(*p.Text)
	}
	return b.String()
}
