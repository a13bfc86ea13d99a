package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/pact/a2a"
	"github.com/pactledger/pactledger/pact/client"
)

// The Brand's answers that stop pactagent, with what the user can do about
// each: the message alone ("HTTP 401") does not say.

// explain adds to err, an answer of the Brand to a send or an
// authorization, what its likely causes are and what to do; other errors
// it returns as they are. contextID is the conversation the send continued.
func (a *agent) explain(err error, contextID string) error {
	var se *client.SendError
	var oe *client.OAuthError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se) && se.Status == http.StatusUnauthorized && !strings.Contains(se.Message, "invalid_token"),
		errors.As(err, &oe) && oe.Status == http.StatusUnauthorized:
		return fmt.Errorf("%w: %s did not accept this agent's signed request. Likely causes:\n"+
			"  - this agent (issuer %s) is not registered with the Brand's Provider: its operator lists the issuer and its jwksUri under agents: in the Provider's configuration;\n"+
			"  - its audience %s is not the Provider's (pactagent init --audience sets it; it must be exactly the Provider's audience);\n"+
			"  - the Provider cannot fetch its keys: %s",
			err, a.card.Organization(), a.settings.Issuer, a.settings.Audience, a.probeJWKS())
	case errors.As(err, &se) && se.Reason == a2a.ReasonInternal && strings.Contains(se.Detail, "keys could not be fetched"):
		again := ""
		if se.RetryAfter > 0 {
			again = fmt.Sprintf("; the Provider waits before fetching them again: try again in %s", se.RetryAfter)
		}
		return fmt.Errorf("%w: the Provider could not fetch this agent's keys: %s%s", err, a.probeJWKS(), again)
	case errors.As(err, &se) && se.Reason == a2a.ReasonInvalidParams && contextID != "" && strings.Contains(se.Detail, "another user"):
		return fmt.Errorf("%w: this conversation was held as another of %s's accounts than the one the grant is for; send with --new to start a new one", err, a.card.Organization())
	case errors.As(err, &se) && se.Reason == a2a.ReasonInvalidParams && contextID != "" && strings.Contains(se.Message+se.Detail, "Unknown contextId"):
		return fmt.Errorf("%w: %s does not know this conversation; send with --new to start a new one", err, a.card.Organization())
	}
	return err
}

// jwksURI is where init told to register the agent's keys.
func (a *agent) jwksURI() string { return a.settings.Issuer + "/.well-known/jwks.json" }

// probeJWKS says whether the agent's JWKS answers, as seen from here, and
// holds its key.
func (a *agent) probeJWKS() string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	u := a.jwksURI()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Sprintf("%s is not a URL (%v)", u, err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Sprintf("nothing answers at %s from here; is pactagent serve --dir %s running?", u, a.dir)
	}
	defer res.Body.Close()
	var set jose.JSONWebKeySet
	switch {
	case res.StatusCode != http.StatusOK:
		return fmt.Sprintf("%s answers HTTP %d; is pactagent serve --dir %s running there?", u, res.StatusCode, a.dir)
	case json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&set) != nil || len(set.Key(a.kid)) == 0:
		return fmt.Sprintf("%s does not list this agent's key %s; is pactagent serve running with another --dir than %s?", u, a.kid, a.dir)
	}
	return fmt.Sprintf("%s serves this agent's key %s (seen from here; the Provider must reach it too)", u, a.kid)
}

// explainCard adds to a card fetch's 404 where cards are: an interface's
// card is at <interface>/.well-known/agent-card.json (PACT §2.1), which it
// tries when cardURL is not a card's address, and a Provider serves a
// brand's at <base>/a2a/<brand>/.well-known/agent-card.json.
func explainCard(ctx context.Context, c *client.Client, cardURL string, err error) error {
	var he *client.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusNotFound {
		return err
	}
	said := ""
	if line, _, _ := strings.Cut(he.Body, "\n"); line != "" {
		said = fmt.Sprintf(" (the server says %q)", line[:min(len(line), 120)])
	}
	u, perr := url.Parse(cardURL)
	if perr == nil && !strings.HasSuffix(u.Path, "/.well-known/agent-card.json") {
		guess := strings.TrimRight(cardURL, "/") + "/.well-known/agent-card.json"
		if _, gerr := c.FetchCard(ctx, guess); gerr == nil {
			return fmt.Errorf("%w%s: that is an interface's address, not its card's: use --card %s", err, said, guess)
		}
	}
	hint := "no Agent Card there"
	if perr == nil {
		if rest, ok := strings.CutPrefix(u.Path, "/a2a/"); ok {
			brand, _, _ := strings.Cut(rest, "/")
			hint = fmt.Sprintf("no Agent Card there: check the brand id %q in the address", brand)
		}
	}
	return fmt.Errorf("%w%s: %s (an interface's card is at <interface>/.well-known/agent-card.json; a PACT Provider serves a brand's at <base>/a2a/<brand id>/.well-known/agent-card.json)", err, said, hint)
}
