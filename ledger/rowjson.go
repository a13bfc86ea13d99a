package ledger

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/pactledger/pactledger/verifier"
)

// AppendJSON appends the JSON of r to dst: the bytes json.Marshal gives
// for r, field for field, written without reflection. The stores encode
// a row in every write, where json.Marshal's reflection and its copy of
// the result cost more than the writing. A row json.Marshal refuses (a
// time it cannot write as RFC 3339) gets json.Marshal's error.
//
// A field added to Row or to a type it holds must be added here too:
// TestRowAppendJSON fills every field by reflection and compares the
// bytes with json.Marshal's.
func (r *Row) AppendJSON(dst []byte) ([]byte, error) {
	w := jsonWriter{b: dst}
	w.b = append(w.b, '{')
	w.str(`"id":`, r.ID)
	w.str(`,"receiptId":`, r.ReceiptID)
	w.int(`,"kind":`, int64(r.Kind))
	w.int(`,"status":`, int64(r.Status))
	w.optStr(`,"grantId":`, r.GrantID)
	w.optStr(`,"principal":`, r.Principal)
	w.optStr(`,"brand":`, r.Brand)

	w.b = append(w.b, `,"agent":`...)
	o := w.object()
	o.optStr(`"platform":`, r.Agent.Platform)
	o.optStr(`"requestJwtKid":`, r.Agent.RequestJWTKid)
	o.optStr(`"jwksSnapshot":`, r.Agent.JWKSSnapshot)
	o.end()

	w.b = append(w.b, `,"brandKey":`...)
	o = w.object()
	o.optStr(`"kid":`, r.BrandKey.Kid)
	o.optStr(`"jwksSnapshot":`, r.BrandKey.JWKSSnapshot)
	o.end()

	w.optStrs(`,"scopeGranted":`, r.ScopeGranted)
	w.optStrs(`,"scopesUsed":`, r.ScopesUsed)

	w.b = append(w.b, `,"limits":`...)
	w.limits(r.Limits)

	if len(r.Actions) > 0 {
		w.b = append(w.b, `,"actions":[`...)
		for i, a := range r.Actions {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.rowAction(a)
		}
		w.b = append(w.b, ']')
	}
	w.time(`,"issuedAt":`, r.IssuedAt)
	w.time(`,"recordedAt":`, r.RecordedAt)

	w.str(`,"verifier":{"checkedBy":`, r.Verifier.CheckedBy)
	w.time(`,"checkedAt":`, r.Verifier.CheckedAt)
	w.b = append(w.b, `,"checks":`...)
	if r.Verifier.Checks == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.b = append(w.b, '[')
		for i, c := range r.Verifier.Checks {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.check(c)
		}
		w.b = append(w.b, ']')
	}
	w.optStr(`,"duplicateOf":`, r.Verifier.DuplicateOf)
	w.b = append(w.b, '}')

	w.int(`,"retentionClass":`, int64(r.Class))
	if !r.RetainUntil.IsZero() {
		w.time(`,"retainUntil":`, r.RetainUntil)
	}
	w.optStr(`,"incidentId":`, r.IncidentID)
	w.int(`,"disputeStatus":`, int64(r.Dispute))
	if len(r.DisputeEvents) > 0 {
		w.b = append(w.b, `,"disputeEvents":[`...)
		for i, e := range r.DisputeEvents {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.time(`{"at":`, e.At)
			w.int(`,"status":`, int64(e.Status))
			w.optStr(`,"note":`, e.Note)
			w.str(`,"by":`, e.By)
			w.b = append(w.b, '}')
		}
		w.b = append(w.b, ']')
	}
	w.str(`,"evidenceSha256":`, r.EvidenceSHA256)
	if r.Refusal != nil {
		w.b = append(w.b, `,"refusal":`...)
		o = w.object()
		o.optStr(`"claimedPrincipal":`, r.Refusal.ClaimedPrincipal)
		o.optStr(`"claimedAgent":`, r.Refusal.ClaimedAgent)
		o.optStr(`"reason":`, r.Refusal.Reason)
		o.end()
	}
	w.optStr(`,"contextId":`, r.ContextID)
	w.optStr(`,"messageId":`, r.MessageID)
	w.optStrs(`,"unclassifiedTools":`, r.UnclassifiedTools)
	w.optStr(`,"requestJwtSha256":`, r.RequestJWTSHA256)
	w.optStr(`,"evidenceNotKept":`, r.EvidenceNotKept)
	w.b = append(w.b, '}')
	if w.bad {
		// The reference's error, word for word.
		_, err := json.Marshal(r)
		return dst, err
	}
	return w.b, nil
}

// AppendJSON appends the JSON of e to dst: the bytes json.Marshal gives
// for e, written without reflection (a bundle is written, and hashed, with
// every receipt). A refusal's bundle is json.Marshal's. A field added to
// Evidence must be added here too: TestEvidenceAppendJSON compares the
// bytes with json.Marshal's for every field.
func (e *Evidence) AppendJSON(dst []byte) ([]byte, error) {
	w := jsonWriter{b: dst}
	if e.Refusal != nil {
		w.bad = true
	}
	o := w.object()
	o.optStr(`"receiptJws":`, e.ReceiptJWS)
	o.optStr(`"requestJwt":`, e.RequestJWT)
	o.optStr(`"delegationToken":`, e.DelegationToken)
	if len(e.Actions) > 0 {
		o.sep()
		w.b = append(w.b, `"actions":[`...)
		for i, a := range e.Actions {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.str(`{"tool":`, a.Tool)
			w.optStr(`,"target":`, a.Target)
			w.optStr(`,"argsJson":`, a.ArgsJSON)
			w.b = append(w.b, '}')
		}
		w.b = append(w.b, ']')
	}
	if e.Limits != nil {
		o.sep()
		w.b = append(w.b, `"limits":`...)
		w.limits(*e.Limits)
	}
	o.end()
	if w.bad {
		b, err := json.Marshal(e)
		if err != nil {
			return dst, err
		}
		return append(dst, b...), nil
	}
	return w.b, nil
}

// limits writes l as an object whose fields are all optional.
func (w *jsonWriter) limits(l Limits) {
	o := w.object()
	o.optStr(`"amountMax":`, l.AmountMax)
	if l.CountMax != 0 {
		o.int(`"countMax":`, int64(l.CountMax))
	}
	if !l.GrantExpires.IsZero() {
		o.time(`"grantExpires":`, l.GrantExpires)
	}
	o.end()
}

func (w *jsonWriter) rowAction(a verifier.RowAction) {
	w.str(`{"tool":`, a.Tool)
	w.optStr(`,"target":`, a.Target)
	w.optStr(`,"argsHash":`, a.ArgsHash)
	if a.HashSource != 0 {
		w.int(`,"argsHashSource":`, int64(a.HashSource))
	}
	if a.TargetSource != 0 {
		w.int(`,"targetSource":`, int64(a.TargetSource))
	}
	w.b = append(w.b, '}')
}

func (w *jsonWriter) check(c verifier.Check) {
	w.str(`{"name":`, c.Name)
	w.int(`,"result":`, int64(c.Result))
	w.optStr(`,"detail":`, c.Detail)
	w.b = append(w.b, '}')
}

// jsonWriter appends JSON as encoding/json writes it by default (HTML
// characters escaped). Each method's key is the text before the value:
// its comma, quotes and colon.
type jsonWriter struct {
	b   []byte
	bad bool // a time encoding/json refuses
}

func (w *jsonWriter) str(key, s string) {
	w.b = append(w.b, key...)
	w.b = appendJSONString(w.b, s)
}

func (w *jsonWriter) optStr(key, s string) {
	if s != "" {
		w.str(key, s)
	}
}

func (w *jsonWriter) optStrs(key string, ss []string) {
	if len(ss) == 0 {
		return
	}
	w.b = append(w.b, key...)
	w.b = append(w.b, '[')
	for i, s := range ss {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = appendJSONString(w.b, s)
	}
	w.b = append(w.b, ']')
}

func (w *jsonWriter) int(key string, n int64) {
	w.b = append(w.b, key...)
	w.b = strconv.AppendInt(w.b, n, 10)
}

// time writes t as time.Time's MarshalJSON does: RFC 3339 with
// nanoseconds, trailing zeros dropped. A time it refuses (a year outside
// 0 to 9999, a zone 24 hours or more from UTC) marks the writer bad.
func (w *jsonWriter) time(key string, t time.Time) {
	w.b = append(w.b, key...)
	w.b = append(w.b, '"')
	n := len(w.b)
	w.b = t.AppendFormat(w.b, time.RFC3339Nano)
	f := w.b[n:]
	switch {
	case len(f) < 5 || f[4] != '-':
		w.bad = true
	case f[len(f)-1] != 'Z':
		c, h := f[len(f)-len("Z07:00")], f[len(f)-len("07:00"):]
		if '0' <= c && c <= '9' || 10*(h[0]-'0')+(h[1]-'0') >= 24 {
			w.bad = true
		}
	}
	w.b = append(w.b, '"')
}

// object starts a JSON object whose fields are all optional.
func (w *jsonWriter) object() jsonObject {
	w.b = append(w.b, '{')
	return jsonObject{w: w}
}

type jsonObject struct {
	w    *jsonWriter
	some bool
}

func (o *jsonObject) sep() {
	if o.some {
		o.w.b = append(o.w.b, ',')
	}
	o.some = true
}

func (o *jsonObject) optStr(key, s string) {
	if s != "" {
		o.sep()
		o.w.str(key, s)
	}
}

func (o *jsonObject) int(key string, n int64) {
	o.sep()
	o.w.int(key, n)
}

func (o *jsonObject) time(key string, t time.Time) {
	o.sep()
	o.w.time(key, t)
}

func (o *jsonObject) end() { o.w.b = append(o.w.b, '}') }

// jsonSafe holds the ASCII bytes a JSON string holds as they are.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for b := range t {
		t[b] = b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// appendJSONString appends s quoted as encoding/json quotes a string:
// quotes, backslashes and control characters escaped, <, > and & as
// \u003c, \u003e and \u0026, U+2028 and U+2029 escaped, and each byte
// that is not UTF-8 as \ufffd.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if jsonSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
