package server

import (
	"strconv"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// appendRowMessage appends the JSON the gateway's protojson options
// (EmitUnpopulated, the JSON field names, enums by name) give the answers
// that carry rows: AppendReceipt's, AppendReceipts', AppendRefusal's,
// GetRow's and ListRows'. They are REST's busiest answers, one with every
// receipt and a page of rows with every lookup, and protojson writes them
// by reflection: about 38 µs and 150 allocations for a receipt's row,
// several times the writing itself.
//
// ok is false for any other message, for a message protojson refuses (a
// string that is not UTF-8, a time or a duration out of its range), and
// for a list holding a nil element, which protojson writes as an empty
// message: the caller then hands it to protojson, which writes it or says
// why not. The JSON holds the same names, values and escapes in the same
// order as protojson's; only the spacing differs, which protojson varies
// on purpose.
//
// A field added to one of these messages, or to a message a row holds,
// must be added here too: TestRowMessagesJSON fills every field by
// reflection and compares the JSON with protojson's.
func appendRowMessage(dst []byte, v any) (_ []byte, ok bool) {
	w := protoJSON{b: dst, ok: true}
	switch m := v.(type) {
	case *ledgerv1.AppendReceiptResponse:
		if m == nil {
			return dst, false
		}
		w.appendResponse("", m)
	case *ledgerv1.AppendReceiptsResponse:
		if m == nil {
			return dst, false
		}
		list(&w, `{"results":`, m.GetResults(), w.receiptResult)
		w.b = append(w.b, '}')
	case *ledgerv1.AppendRefusalResponse:
		if m == nil {
			return dst, false
		}
		w.row(`{"row":`, m.GetRow())
		w.b = append(w.b, '}')
	case *ledgerv1.GetRowResponse:
		if m == nil {
			return dst, false
		}
		w.row(`{"row":`, m.GetRow())
		w.b = append(w.b, '}')
	case *ledgerv1.ListRowsResponse:
		if m == nil {
			return dst, false
		}
		list(&w, `{"rows":`, m.GetRows(), w.row)
		w.str(`,"nextPageToken":`, m.GetNextPageToken())
		w.b = append(w.b, '}')
	default:
		return dst, false
	}
	if !w.ok {
		return dst, false
	}
	return w.b, true
}

// protoJSON appends JSON as protojson writes it. Each method's first
// argument is the text before the value: its comma, quotes and colon. ok
// turns false at a value protojson refuses or a nil list element.
type protoJSON struct {
	b  []byte
	ok bool
}

func (w *protoJSON) appendResponse(pre string, m *ledgerv1.AppendReceiptResponse) {
	w.b = append(w.b, pre...)
	if m == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.row(`{"row":`, m.GetRow())
	w.enum(`,"outcome":`, int32(m.GetOutcome()), ledgerv1.AppendOutcome_name)
	w.b = append(w.b, '}')
}

func (w *protoJSON) receiptResult(pre string, r *ledgerv1.AppendReceiptResult) {
	w.appendResponse(pre+`{"response":`, r.GetResponse())
	w.int(`,"code":`, r.GetCode())
	w.str(`,"message":`, r.GetMessage())
	w.duration(`,"retryDelay":`, r.GetRetryDelay())
	w.str(`,"reason":`, r.GetReason())
	w.b = append(w.b, '}')
}

// row writes r, or null.
func (w *protoJSON) row(pre string, r *ledgerv1.Row) {
	w.b = append(w.b, pre...)
	if r == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.str(`{"id":`, r.GetId())
	w.str(`,"receiptId":`, r.GetReceiptId())
	w.enum(`,"kind":`, int32(r.GetKind()), ledgerv1.RowKind_name)
	w.enum(`,"status":`, int32(r.GetStatus()), ledgerv1.RowStatus_name)
	w.str(`,"grantId":`, r.GetGrantId())
	w.str(`,"principal":`, r.GetPrincipal())
	w.str(`,"brand":`, r.GetBrand())
	if a := r.GetAgent(); a != nil {
		w.str(`,"agent":{"platform":`, a.GetPlatform())
		w.str(`,"requestJwtKid":`, a.GetRequestJwtKid())
		w.str(`,"jwksSnapshot":`, a.GetJwksSnapshot())
		w.b = append(w.b, '}')
	} else {
		w.b = append(w.b, `,"agent":null`...)
	}
	if k := r.GetBrandKey(); k != nil {
		w.str(`,"brandKey":{"kid":`, k.GetKid())
		w.str(`,"jwksSnapshot":`, k.GetJwksSnapshot())
		w.b = append(w.b, '}')
	} else {
		w.b = append(w.b, `,"brandKey":null`...)
	}
	w.strs(`,"scopeGranted":`, r.GetScopeGranted())
	w.strs(`,"scopesUsed":`, r.GetScopesUsed())
	if l := r.GetLimits(); l != nil {
		w.str(`,"limits":{"amountMax":`, l.GetAmountMax())
		w.int(`,"countMax":`, l.GetCountMax())
		w.timestamp(`,"grantExpires":`, l.GetGrantExpires())
		w.b = append(w.b, '}')
	} else {
		w.b = append(w.b, `,"limits":null`...)
	}
	list(w, `,"actions":`, r.GetActions(), func(pre string, a *ledgerv1.RowAction) {
		w.str(pre+`{"tool":`, a.GetTool())
		w.str(`,"target":`, a.GetTarget())
		w.str(`,"argsHash":`, a.GetArgsHash())
		w.enum(`,"argsHashSource":`, int32(a.GetArgsHashSource()), ledgerv1.ArgsHashSource_name)
		w.enum(`,"targetSource":`, int32(a.GetTargetSource()), ledgerv1.TargetSource_name)
		w.b = append(w.b, '}')
	})
	w.timestamp(`,"issuedAt":`, r.GetIssuedAt())
	w.timestamp(`,"recordedAt":`, r.GetRecordedAt())
	w.verifier(r.GetVerifier())
	w.enum(`,"retentionClass":`, int32(r.GetRetentionClass()), ledgerv1.RetentionClass_name)
	w.timestamp(`,"retainUntil":`, r.GetRetainUntil())
	w.str(`,"incidentId":`, r.GetIncidentId())
	w.enum(`,"disputeStatus":`, int32(r.GetDisputeStatus()), ledgerv1.DisputeStatus_name)
	list(w, `,"disputeEvents":`, r.GetDisputeEvents(), func(pre string, e *ledgerv1.DisputeEvent) {
		w.timestamp(pre+`{"at":`, e.GetAt())
		w.enum(`,"status":`, int32(e.GetStatus()), ledgerv1.DisputeStatus_name)
		w.str(`,"note":`, e.GetNote())
		w.str(`,"by":`, e.GetBy())
		w.b = append(w.b, '}')
	})
	w.str(`,"evidenceSha256":`, r.GetEvidenceSha256())
	if f := r.GetRefusal(); f != nil {
		w.str(`,"refusal":{"claimedPrincipal":`, f.GetClaimedPrincipal())
		w.str(`,"claimedAgent":`, f.GetClaimedAgent())
		w.str(`,"reason":`, f.GetReason())
		w.b = append(w.b, '}')
	} else {
		w.b = append(w.b, `,"refusal":null`...)
	}
	w.str(`,"contextId":`, r.GetContextId())
	w.str(`,"messageId":`, r.GetMessageId())
	w.strs(`,"unclassifiedTools":`, r.GetUnclassifiedTools())
	w.str(`,"evidenceNotKept":`, r.GetEvidenceNotKept())
	w.b = append(w.b, '}')
}

func (w *protoJSON) verifier(v *ledgerv1.Verifier) {
	if v == nil {
		w.b = append(w.b, `,"verifier":null`...)
		return
	}
	w.str(`,"verifier":{"checkedBy":`, v.GetCheckedBy())
	w.timestamp(`,"checkedAt":`, v.GetCheckedAt())
	list(w, `,"checks":`, v.GetChecks(), func(pre string, c *ledgerv1.Check) {
		w.str(pre+`{"name":`, c.GetName())
		w.enum(`,"result":`, int32(c.GetResult()), ledgerv1.CheckResult_name)
		w.str(`,"detail":`, c.GetDetail())
		w.b = append(w.b, '}')
	})
	w.str(`,"duplicateOf":`, v.GetDuplicateOf())
	w.b = append(w.b, '}')
}

// str writes s as protojson does: only '"', '\\' and control characters
// escaped. A string that is not UTF-8 is protojson's to refuse.
func (w *protoJSON) str(pre, s string) {
	w.b = append(w.b, pre...)
	w.b = append(w.b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				w.ok = false
				return
			}
			i += n
			continue
		}
		if c >= ' ' && c != '"' && c != '\\' {
			i++
			continue
		}
		w.b = append(w.b, s[start:i]...)
		switch c {
		case '"', '\\':
			w.b = append(w.b, '\\', c)
		case '\b':
			w.b = append(w.b, '\\', 'b')
		case '\f':
			w.b = append(w.b, '\\', 'f')
		case '\n':
			w.b = append(w.b, '\\', 'n')
		case '\r':
			w.b = append(w.b, '\\', 'r')
		case '\t':
			w.b = append(w.b, '\\', 't')
		default:
			w.b = append(w.b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	w.b = append(w.b, s[start:]...)
	w.b = append(w.b, '"')
}

const hexDigits = "0123456789abcdef"

func (w *protoJSON) strs(pre string, ss []string) {
	w.b = append(w.b, pre...)
	w.b = append(w.b, '[')
	for i, s := range ss {
		w.str(sep(i), s)
	}
	w.b = append(w.b, ']')
}

// list writes pre and the messages of a repeated field as an array, each
// by write with the comma before it. A nil element is protojson's to
// write.
func list[M any](w *protoJSON, pre string, ms []*M, write func(pre string, m *M)) {
	w.b = append(w.b, pre...)
	w.b = append(w.b, '[')
	for i, m := range ms {
		if m == nil {
			w.ok = false
			return
		}
		write(sep(i), m)
	}
	w.b = append(w.b, ']')
}

// sep is the text before the ith element of an array.
func sep(i int) string {
	if i == 0 {
		return ""
	}
	return ","
}

func (w *protoJSON) int(pre string, n int32) {
	w.b = append(w.b, pre...)
	w.b = strconv.AppendInt(w.b, int64(n), 10)
}

// enum writes n's name, or n where the enum has no such value.
func (w *protoJSON) enum(pre string, n int32, names map[int32]string) {
	name, ok := names[n]
	if !ok {
		w.int(pre, n)
		return
	}
	w.b = append(w.b, pre...)
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, '"')
}

// protojson's ranges: a Timestamp from 0001-01-01 to 9999-12-31, a
// Duration up to 10,000 years either way, nanoseconds under a second.
const (
	minTimestampSeconds = -62135596800
	maxTimestampSeconds = 253402300799
	maxDurationSeconds  = 315576000000
	maxNanos            = 999999999
)

// timestamp writes t as RFC 3339 in UTC with 0, 3, 6 or 9 fractional
// digits, or null.
func (w *protoJSON) timestamp(pre string, t *timestamppb.Timestamp) {
	w.b = append(w.b, pre...)
	if t == nil {
		w.b = append(w.b, "null"...)
		return
	}
	secs, nanos := t.GetSeconds(), int64(t.GetNanos())
	if secs < minTimestampSeconds || secs > maxTimestampSeconds || nanos < 0 || nanos > maxNanos {
		w.ok = false
		return
	}
	w.b = append(w.b, '"')
	w.b = time.Unix(secs, 0).UTC().AppendFormat(w.b, "2006-01-02T15:04:05")
	w.fraction(nanos)
	w.b = append(w.b, 'Z', '"')
}

// duration writes d as seconds with 0, 3, 6 or 9 fractional digits and
// an "s", or null.
func (w *protoJSON) duration(pre string, d *durationpb.Duration) {
	w.b = append(w.b, pre...)
	if d == nil {
		w.b = append(w.b, "null"...)
		return
	}
	secs, nanos := d.GetSeconds(), int64(d.GetNanos())
	if secs < -maxDurationSeconds || secs > maxDurationSeconds || nanos < -maxNanos || nanos > maxNanos ||
		(secs > 0 && nanos < 0) || (secs < 0 && nanos > 0) {
		w.ok = false
		return
	}
	w.b = append(w.b, '"')
	if secs < 0 || nanos < 0 {
		w.b = append(w.b, '-')
		secs, nanos = -secs, -nanos
	}
	w.b = strconv.AppendInt(w.b, secs, 10)
	w.fraction(nanos)
	w.b = append(w.b, 's', '"')
}

// fraction writes nanos (under a second) as a dot and 3, 6 or 9 digits,
// the fewest that hold it, or nothing for 0.
func (w *protoJSON) fraction(nanos int64) {
	if nanos == 0 {
		return
	}
	digits := 9
	for nanos%1000 == 0 {
		nanos /= 1000
		digits -= 3
	}
	w.b = append(w.b, '.')
	var buf [9]byte
	for i := digits - 1; i >= 0; i-- {
		buf[i] = byte('0' + nanos%10)
		nanos /= 10
	}
	w.b = append(w.b, buf[:digits]...)
}
