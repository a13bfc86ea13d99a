package drill

import (
	"fmt"
	"strings"
)

// Names are the words a customer reply uses in place of ids: the brand's
// own name, its scope descriptions and its tools' human names, and the
// personal-agent platform's display name. Anything not named here is
// said by its id.
type Names struct {
	// Brands by interface URL (a row's brand).
	Brands map[string]BrandNames
	// Agents maps a personal-agent issuer (a row's agent platform, a
	// token's client_id) to its display name.
	Agents map[string]string
}

// BrandNames are one brand's words.
type BrandNames struct {
	// Name is what the customer calls the business ("Acme Outfitters").
	Name string
	// Scopes maps a scope id to the description the consent page shows.
	Scopes map[string]string
	// Tools maps a tool to its human name ("cancel an order").
	Tools map[string]string
}

// brand is the brand's name, or "us" when none is known.
func (n Names) brand(url string) string {
	if b, ok := n.Brands[url]; ok && b.Name != "" {
		return b.Name
	}
	return "us"
}

// agent is the platform's display name, or its issuer.
func (n Names) agent(issuer string) string {
	if d := n.Agents[issuer]; d != "" {
		return d
	}
	return issuer
}

// scopes lists the scopes in the brand's words (lower case first letter),
// or by id where the brand gave none.
func (n Names) scopes(url string, ids []string) string {
	out := make([]string, len(ids))
	words := false
	for i, id := range ids {
		out[i] = id
		if d := n.Brands[url].Scopes[id]; d != "" {
			out[i], words = lowerFirst(d), true
		}
	}
	if !words {
		return strings.Join(out, ", ")
	}
	// Descriptions may hold commas: semicolons part them.
	switch len(out) {
	case 1:
		return out[0]
	case 2:
		return out[0] + " and " + out[1]
	}
	return strings.Join(out[:len(out)-1], "; ") + "; and " + out[len(out)-1]
}

// action is what the row's tools did, in the brand's words when it has
// them: `"cancel an order" on A-5531`, else `cancel_order on A-5531`.
func (n Names) action(url string, tools []string, targets string) string {
	return n.tools(url, tools) + " on " + targets
}

// tools is what the tools did, in the brand's words when it has them:
// `"cancel an order"`, else `cancel_order`; "a reply" for none.
func (n Names) tools(url string, tools []string) string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = asName(t)
		if h := n.tool(url, t); h != "" {
			out[i] = fmt.Sprintf("%q", lowerFirst(h))
		}
	}
	if len(out) == 0 {
		out = []string{"a reply"}
	}
	return strings.Join(out, ", ")
}

// asName is a tool or target as a reply names it. Most are names
// (cancel_order, A-5531, SKY-20931) and stand as they are. One that is
// not (words, punctuation: a writer's key chooses a refusal's tool and
// target, and an action log's target) is quoted, and cut after
// maxQuotedName characters, so that the reply never reads a writer's
// words as its own sentences.
func asName(s string) string {
	if nameLike(s) {
		return s
	}
	if r := []rune(s); len(r) > maxQuotedName {
		s = string(r[:maxQuotedName]) + "…"
	}
	return fmt.Sprintf("%q", s)
}

// maxQuotedName bounds what a reply quotes of a tool or target that is
// not a name.
const maxQuotedName = 40

// nameLike reports whether s is a name a reply can show unquoted: 1 to
// 128 ASCII letters, digits and _ . : / # + @ -. Other letters are
// quoted: some are drawn as a blank (U+3164, a Hangul filler, is a
// letter to Unicode), so words joined by them would read as a sentence.
func nameLike(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.:/#+@-", c) >= 0) {
			return false
		}
	}
	return true
}

func lowerFirst(s string) string {
	if s == "" || strings.ToUpper(s[:1]) != s[:1] || (len(s) > 1 && strings.ToUpper(s[1:2]) == s[1:2] && strings.ToLower(s[1:2]) != s[1:2]) {
		return s // already lower case, or an acronym
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// sendMessage is the A2A method an agent calls for a turn: what a refusal
// under a revoked grant names when the Provider refused the turn itself.
const sendMessage = "message:send"

// tool is the human name of tool: the brand's, or, for a row that names
// no brand (a refusal of a request made without a grant) or one without
// words for it, the one every configured brand that has the tool gives
// it; "" when there is none or they differ.
func (n Names) tool(url, tool string) string {
	if h := n.Brands[url].Tools[tool]; h != "" {
		return h
	}
	if tool == sendMessage {
		return "a reply to its message"
	}
	name := ""
	for _, b := range n.Brands {
		switch h := b.Tools[tool]; {
		case h == "":
		case name == "":
			name = h
		case h != name:
			return ""
		}
	}
	return name
}
