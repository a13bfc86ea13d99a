// Package customer plays a customer at a Brand's login and the Provider's
// consent page, the way a browser without JavaScript does: it follows the
// verification link a personal agent shows, signs in, and allows (all or
// some of the scopes) or denies. The demo script and the end-to-end tests
// use it; the personal agent never does (PACT §5.3).
package customer

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/html"
)

// Customer is one person with a browser (cookies kept between calls).
type Customer struct {
	Email, Password string
	http            *http.Client
}

// New returns a customer with an empty cookie jar.
func New(email, password string) *Customer {
	jar, _ := cookiejar.New(nil)
	return &Customer{Email: email, Password: password, http: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// Page is a fetched HTML page.
type Page struct {
	URL    *url.URL
	Status int
	Title  string
	Text   string // visible text, space-joined
	Error  string // the page's error message, if any
	root   *html.Node
}

// Decision says what to do on the consent page.
type Decision struct {
	Deny bool
	// Keep lists the scope ids to leave checked; nil keeps all.
	Keep []string
	// UserCode is typed in when the link does not carry it.
	UserCode string
}

// Answer opens a verification link, signs in (or continues a live Brand
// session), and answers the consent page. It returns the final page: "Allowed",
// "Denied" or "Already allowed", or an error naming the page it stopped on.
func (c *Customer) Answer(ctx context.Context, link string, d Decision) (*Page, error) {
	pg, err := c.get(ctx, link)
	if err != nil {
		return nil, err
	}
	// The Brand's login: a password form, or Continue with a live session.
	fields := map[string]string{}
	if pg.find("email") != nil {
		fields["email"], fields["password"] = c.Email, c.Password
	}
	if n := pg.find("user_code"); n != nil && attr(n, "type") == "text" {
		fields["user_code"] = d.UserCode
	}
	if pg, err = c.submit(ctx, pg, "", fields, nil); err != nil {
		return nil, err
	}
	if pg.Title != "" && strings.HasPrefix(pg.Title, "Sign in") {
		return pg, fmt.Errorf("sign-in failed: %s", pg.Error)
	}
	// The hand-off back to the Provider.
	if pg.find("assertion") == nil {
		return pg, fmt.Errorf("expected the hand-off page, got %q: %s", pg.Title, pg.Error)
	}
	if pg, err = c.submit(ctx, pg, "", nil, nil); err != nil {
		return nil, err
	}
	if pg.Title == "Already allowed" || pg.find("ticket") == nil {
		if pg.Error != "" {
			return pg, fmt.Errorf("%s: %s", pg.Title, pg.Error)
		}
		return pg, nil
	}
	// Consent: uncheck what is not kept, then allow or deny.
	button := "approve"
	if d.Deny {
		button = "deny"
	}
	uncheck := map[string]bool{}
	if d.Keep != nil {
		for _, s := range pg.checkboxes("scope") {
			if !slices.Contains(d.Keep, s) {
				uncheck[s] = true
			}
		}
	}
	if pg, err = c.submit(ctx, pg, button, nil, uncheck); err != nil {
		return nil, err
	}
	if pg.Error != "" {
		return pg, fmt.Errorf("%s: %s", pg.Title, pg.Error)
	}
	return pg, nil
}

// Revoke signs in at a Brand's account page (grantsURL) when needed and
// revokes the grant with id grantID there.
func (c *Customer) Revoke(ctx context.Context, grantsURL, grantID string) error {
	pg, err := c.get(ctx, grantsURL)
	if err != nil {
		return err
	}
	if pg.find("email") != nil {
		if pg, err = c.submit(ctx, pg, "", map[string]string{"email": c.Email, "password": c.Password}, nil); err != nil {
			return err
		}
	}
	var form *html.Node
	each(pg.root, func(n *html.Node) bool {
		if n.Type == html.ElementNode && n.Data == "form" && findIn(n, func(x *html.Node) bool {
			return x.Data == "input" && attr(x, "name") == "grant" && attr(x, "value") == grantID
		}) != nil {
			form = n
			return false
		}
		return true
	})
	if form == nil {
		return fmt.Errorf("the account page (%q) lists no active grant %s", pg.Title, grantID)
	}
	if pg, err = c.post(ctx, pg, form, "", nil, nil); err != nil {
		return err
	}
	if pg.Status != http.StatusOK || !strings.Contains(pg.Text, "revoked") {
		return fmt.Errorf("revoking %s: %q %s", grantID, pg.Title, pg.Error)
	}
	return nil
}

// Scopes returns the scope ids offered on a consent page.
func (p *Page) Scopes() []string { return p.checkboxes("scope") }

func (c *Customer) get(ctx context.Context, u string) (*Page, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	return c.do(req)
}

func (c *Customer) do(req *http.Request) (*Page, error) {
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	root, err := html.Parse(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	p := &Page{URL: res.Request.URL, Status: res.StatusCode, root: root}
	var text []string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "title" && n.FirstChild != nil {
			p.Title = strings.TrimSpace(n.FirstChild.Data)
			return
		}
		if n.Type == html.ElementNode && (n.Data == "style" || n.Data == "script") {
			return
		}
		if n.Type == html.ElementNode && attr(n, "id") == "error" && n.FirstChild != nil {
			p.Error = strings.TrimSpace(n.FirstChild.Data)
		}
		if n.Type == html.TextNode && strings.TrimSpace(n.Data) != "" {
			text = append(text, strings.TrimSpace(n.Data))
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(root)
	p.Text = strings.Join(text, " ")
	return p, nil
}

// submit posts the first form of the page that has the named button (or
// the first form when button is ""), with its inputs, fields set, and the
// checkboxes in uncheck cleared.
func (c *Customer) submit(ctx context.Context, p *Page, button string, fields map[string]string, uncheck map[string]bool) (*Page, error) {
	var form *html.Node
	each(p.root, func(n *html.Node) bool {
		if n.Type != html.ElementNode || n.Data != "form" {
			return true
		}
		if button == "" || findIn(n, func(x *html.Node) bool { return x.Data == "button" && attr(x, "value") == button }) != nil {
			form = n
			return false
		}
		return true
	})
	if form == nil {
		return nil, fmt.Errorf("page %q (%s) has no form to submit", p.Title, p.URL)
	}
	return c.post(ctx, p, form, button, fields, uncheck)
}

// post submits form as a browser does: its inputs (checked checkboxes
// only, less those in uncheck), the pressed button, and fields set.
func (c *Customer) post(ctx context.Context, p *Page, form *html.Node, button string, fields map[string]string, uncheck map[string]bool) (*Page, error) {
	vals := url.Values{}
	each(form, func(n *html.Node) bool {
		if n.Type != html.ElementNode {
			return true
		}
		name := attr(n, "name")
		switch {
		case n.Data == "input" && name != "":
			switch attr(n, "type") {
			case "checkbox":
				if hasAttr(n, "checked") && !uncheck[attr(n, "value")] {
					vals.Add(name, attr(n, "value"))
				}
			default:
				vals.Add(name, attr(n, "value"))
			}
		case n.Data == "button" && name != "" && attr(n, "value") == button:
			vals.Set(name, button)
		}
		return true
	})
	for k, v := range fields {
		vals.Set(k, v)
	}
	action, err := p.URL.Parse(attr(form, "action"))
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, action.String(), strings.NewReader(vals.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.do(req)
}

func (p *Page) find(name string) *html.Node {
	return findIn(p.root, func(n *html.Node) bool { return n.Data == "input" && attr(n, "name") == name })
}

func (p *Page) checkboxes(name string) []string {
	var out []string
	each(p.root, func(n *html.Node) bool {
		if n.Type == html.ElementNode && n.Data == "input" && attr(n, "type") == "checkbox" && attr(n, "name") == name {
			out = append(out, attr(n, "value"))
		}
		return true
	})
	return out
}

func each(n *html.Node, fn func(*html.Node) bool) bool {
	if !fn(n) {
		return false
	}
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		if !each(ch, fn) {
			return false
		}
	}
	return true
}

func findIn(root *html.Node, match func(*html.Node) bool) *html.Node {
	var found *html.Node
	each(root, func(n *html.Node) bool {
		if n.Type == html.ElementNode && match(n) {
			found = n
			return false
		}
		return true
	})
	return found
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	return slices.ContainsFunc(n.Attr, func(a html.Attribute) bool { return a.Key == key })
}
