package brandlogin

import (
	"bytes"
	"html/template"
	"net/http"
	"strconv"
)

// The pages people see: the demo Brand's login and account page, and the
// Provider's consent page. Plain server-rendered HTML that works without
// JavaScript; every form carries a CSRF token.

const pageLayout = `{{define "top"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;max-width:34rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b;line-height:1.45}
h1{font-size:1.35rem}label{display:block;margin:.6rem 0}input[type=text],input[type=email],input[type=password]{width:100%;padding:.45rem;font-size:1rem;box-sizing:border-box}
button{font-size:1rem;padding:.45rem 1.1rem;margin:.6rem .4rem 0 0}.code{font-family:monospace;font-size:1.2rem;letter-spacing:.1em}
.scope{border:1px solid #ccc;border-radius:6px;padding:.5rem .7rem;margin:.4rem 0}.scope small{color:#555}
.note{color:#555;font-size:.9rem}.error{color:#a00000}table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.35rem;text-align:left;vertical-align:top}
</style></head><body>{{end}}
{{define "bottom"}}</body></html>{{end}}

{{define "message"}}{{template "top" .}}
<h1 id="title">{{.Title}}</h1>
{{if .Error}}<p class="error" id="error">{{.Error}}</p>{{end}}
{{range .Lines}}<p>{{.}}</p>{{end}}
{{template "bottom" .}}{{end}}

{{define "login"}}{{template "top" .}}
<h1>Sign in to {{.Brand}}</h1>
{{if .Error}}<p class="error" id="error">{{.Error}}</p>{{end}}
{{if .UserCode}}<p>Your personal agent shows this code. Continue only if it is the same:</p>
<p class="code" id="user-code">{{.UserCode}}</p>{{end}}
<form method="post" action="{{.Action}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<input type="hidden" name="return_to" value="{{.ReturnTo}}">
{{if .ReturnTo}}{{if not .UserCode}}<label>Code shown by your agent <input type="text" name="user_code" id="user_code" autocomplete="off" required></label>
{{else}}<input type="hidden" name="user_code" value="{{.UserCode}}">{{end}}{{end}}
{{if .SignedInAs}}<p>Signed in as <strong id="signed-in-as">{{.SignedInAs}}</strong>.</p>
<button type="submit" id="continue">Continue</button>
{{else}}<label>Email <input type="email" name="email" id="email" autocomplete="username" required></label>
<label>Password <input type="password" name="password" id="password" autocomplete="current-password" required></label>
<button type="submit" id="sign-in">Sign in</button>{{end}}
</form>
{{if .SignedInAs}}<form method="post" action="{{.LogoutAction}}"><input type="hidden" name="csrf" value="{{.LogoutCSRF}}"><button type="submit" id="sign-out">Not you? Sign out</button></form>{{end}}
<p class="note">You sign in with {{.Brand}} only. Your personal agent never sees your password.</p>
{{template "bottom" .}}{{end}}

{{define "handoff"}}{{template "top" .}}
<h1>Signed in to {{.Brand}}</h1>
<p>Signed in as <strong>{{.SignedInAs}}</strong>. Next, review what your personal agent asks to do.</p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="assertion" value="{{.Assertion}}">
<button type="submit" id="continue">Review the request</button>
</form>
{{template "bottom" .}}{{end}}

{{define "consent"}}{{template "top" .}}
<h1>Allow a personal agent to act on your {{.Brand}} account?</h1>
<p>The personal agent {{with .PAName}}<strong id="pa-name">{{.}}</strong> {{end}}at <strong id="pa-origin">{{.PAOrigin}}</strong> asks to act for you, signed in as <strong>{{.User}}</strong>, at <strong id="brand">{{.Brand}}</strong>.</p>
<p>Code: <span class="code">{{.UserCode}}</span>. Uncheck anything you do not want to allow.</p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="ticket" value="{{.Ticket}}">
{{range .Scopes}}<label class="scope"><input type="checkbox" name="scope" value="{{.ID}}" id="scope-{{.Slug}}" checked> {{.Description}} <small>({{.ID}})</small></label>
{{end}}
<button type="submit" name="decision" value="approve" id="approve">Allow</button>
<button type="submit" name="decision" value="deny" id="deny">Deny</button>
</form>
{{if .Carried}}<p class="note" id="carried">Your agent keeps what you allowed it before: {{range $i, $s := .Carried}}{{if $i}}; {{end}}{{$s}}{{end}}. That stays until {{.CarriedUntil}}, and what you allow now ends then too; you can revoke it at any time.</p>
{{else if .CarriedUnknown}}<p class="note" id="carried-unknown">What your agent keeps of what you allowed it before cannot be checked right now. Whatever of it still stands is kept until it ends, and what you allow now ends then too; you can revoke it at any time.</p>
{{end}}<p class="note">Agent: {{.PA}}. You can revoke this at any time on your {{.Brand}} account page.</p>
{{template "bottom" .}}{{end}}

{{define "grants"}}{{template "top" .}}
<h1>Personal agents on your {{.Brand}} account</h1>
<p>Signed in as <strong>{{.SignedInAs}}</strong>.</p>
{{if .Grants}}<table id="grants"><tr><th>Agent</th><th>Allowed</th><th>Since</th><th></th></tr>
{{range .Grants}}<tr><td>{{.Agent}}</td><td>{{range .Scopes}}{{.}}<br>{{end}}</td><td>{{.Created}}<br><span class="note">{{.Status}}</span></td>
<td>{{if .Active}}<form method="post" action="{{$.Action}}"><input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="grant" value="{{.ID}}"><button type="submit" id="revoke-{{.ID}}">Revoke</button></form>{{end}}</td></tr>
{{end}}</table>{{else}}<p id="no-grants">No personal agent may act on your account.</p>{{end}}
<form method="post" action="{{.LogoutAction}}"><input type="hidden" name="csrf" value="{{.LogoutCSRF}}"><button type="submit" id="sign-out">Sign out</button></form>
{{template "bottom" .}}{{end}}`

var pages = template.Must(template.New("pages").Parse(pageLayout))

// page renders a template with security headers: no framing (the personal
// agent must not frame the login), no caching, no referrer, forms only to
// formTargets.
func page(w http.ResponseWriter, code int, name string, data any, formTargets ...string) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		http.Error(w, "page error", http.StatusInternalServerError)
		return
	}
	formAction := "'self'"
	for _, t := range formTargets {
		formAction += " " + t
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action "+formAction+"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// messagePage is a page of plain sentences, or an error.
func messagePage(w http.ResponseWriter, code int, title, errText string, lines ...string) {
	page(w, code, "message", map[string]any{"Title": title, "Error": errText, "Lines": lines})
}
