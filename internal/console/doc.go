// Package console is the support lead's and auditor's web console, served
// by ledgerd under /console/ on its REST listener.
//
// Pages are rendered on the server with html/template; a small script
// (embedded, like the stylesheet) adds the viewer's local time beside each
// UTC time, copy buttons and busy states. Nothing is fetched from outside.
//
// The console holds no privilege of its own. Signing in exchanges an API key
// for a session cookie; the key stays in this process's memory, never in
// the cookie, and every page calls the ledger API through the generated
// gRPC client with that key as `authorization: Bearer <key>`, so the
// server's authentication and role checks apply to every action unchanged.
// The key's role only shapes the page (an auditor sees no dispute, drill or
// close buttons); a forged post is refused by the API.
//
// Security: a strict Content-Security-Policy (script and style from 'self'
// only, no inline script), a CSRF token on every form (and a double-submit
// token on the sign-in form, before any session exists), cross-origin
// unsafe requests refused, an HttpOnly SameSite=Strict session cookie that
// is Secure when served over TLS or configured so, sessions that end after
// an idle period and a maximum age, failed sign-ins bounded per client
// address, and bounded inputs. Every action is
// logged with the name of the key that did it; keys and notes never are.
package console
