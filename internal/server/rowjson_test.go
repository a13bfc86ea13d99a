package server

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// TestRowMessagesJSON fills every field of the answers that carry rows by
// reflection, a few thousand times with random values, and holds the JSON
// written without reflection to protojson's: the same bytes but for the
// spacing, the same from the gateway's marshaler, and written exactly
// where protojson writes (a string that is not UTF-8, a time out of
// range: protojson's refusal). The zone is not UTC while it runs. A
// field added to one of these messages gets filled here and fails the test
// until appendRowMessage writes it.
func TestRowMessagesJSON(t *testing.T) {
	// Times are written in UTC whatever the machine's zone: run in one
	// that is not (the package's tests do not run in parallel).
	local := time.Local
	time.Local = time.FixedZone("UTC+5:30", 5*3600+1800)
	defer func() { time.Local = local }()
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []func() proto.Message{
		func() proto.Message { return &ledgerv1.AppendReceiptResponse{} },
		func() proto.Message { return &ledgerv1.AppendReceiptsResponse{} },
		func() proto.Message { return &ledgerv1.AppendRefusalResponse{} },
		func() proto.Message { return &ledgerv1.GetRowResponse{} },
		func() proto.Message { return &ledgerv1.ListRowsResponse{} },
	}
	written, refused := 0, 0
	for i := range 5000 {
		m := kinds[i%len(kinds)]()
		fill(t, rng, m.ProtoReflect(), 0)
		got, ok := agreesWithProtojson(t, m)
		if !ok {
			refused++
			continue
		}
		written++
		back := m.ProtoReflect().New().Interface()
		if err := protojson.Unmarshal(got, back); err != nil || !proto.Equal(back, m) {
			t.Fatalf("%T: protojson reads back %v (%v)\n%s", m, back, err, got)
		}
	}
	if written < 3500 || refused < 100 {
		t.Fatalf("written %d, refused %d: the filler no longer covers both", written, refused)
	}
}

// TestRowMessagesJSONEdges holds what the random fill may miss: typed nil
// messages and nil list elements go to protojson, every other message to
// runtime.JSONPb, and times at the edges of protojson's range.
func TestRowMessagesJSONEdges(t *testing.T) {
	for _, v := range []any{
		(*ledgerv1.GetRowResponse)(nil),
		(*ledgerv1.ListRowsResponse)(nil),
		&ledgerv1.ListRowsResponse{Rows: []*ledgerv1.Row{{}, nil}},
		&ledgerv1.AppendReceiptsResponse{Results: []*ledgerv1.AppendReceiptResult{nil}},
		&ledgerv1.GetRowResponse{Row: &ledgerv1.Row{Actions: []*ledgerv1.RowAction{nil}}},
		&ledgerv1.GetRowResponse{Row: &ledgerv1.Row{DisputeEvents: []*ledgerv1.DisputeEvent{nil}}},
		&ledgerv1.GetRowResponse{Row: &ledgerv1.Row{Verifier: &ledgerv1.Verifier{Checks: []*ledgerv1.Check{nil}}}},
		&ledgerv1.GetGrantResponse{},
		map[string]string{"a": "b"},
		nil,
	} {
		if _, ok := appendRowMessage(nil, v); ok {
			t.Errorf("%T %v: written without protojson", v, v)
		}
	}
	for _, ts := range []*timestamppb.Timestamp{
		{Seconds: minTimestampSeconds}, {Seconds: maxTimestampSeconds, Nanos: maxNanos}, {Seconds: -1, Nanos: 1},
		{Seconds: 0, Nanos: 1000}, {Seconds: 1, Nanos: 1000000}, {Seconds: 1, Nanos: 100000000},
		{Seconds: minTimestampSeconds - 1}, {Seconds: maxTimestampSeconds + 1}, {Nanos: -1}, {Nanos: 1e9},
	} {
		agreesWithProtojson(t, &ledgerv1.GetRowResponse{Row: &ledgerv1.Row{IssuedAt: ts}})
	}
	for _, d := range []*durationpb.Duration{
		{Seconds: maxDurationSeconds, Nanos: maxNanos}, {Seconds: -maxDurationSeconds, Nanos: -maxNanos}, {Nanos: -5000},
		{Seconds: 3, Nanos: 120000000}, {Seconds: maxDurationSeconds + 1}, {Seconds: 1, Nanos: -1}, {Seconds: -1, Nanos: 1}, {Nanos: 1e9},
	} {
		agreesWithProtojson(t, &ledgerv1.AppendReceiptsResponse{Results: []*ledgerv1.AppendReceiptResult{{RetryDelay: d}}})
	}
}

// agreesWithProtojson fails t where m's JSON and protojson's differ
// beyond their spacing, where one refuses m and the other does not, or
// where the gateway's marshaler writes other bytes or refuses m with
// another error than protojson's. It returns the JSON and whether m was
// written.
func agreesWithProtojson(t *testing.T, m proto.Message) ([]byte, bool) {
	t.Helper()
	want, werr := gatewayJSON().MarshalOptions.Marshal(m)
	got, ok := appendRowMessage(nil, m)
	switch {
	case ok != (werr == nil):
		t.Fatalf("%T: written %v, protojson's error %v\n%s", m, ok, werr, prototextOf(m))
	case !ok:
		if _, err := gatewayJSON().Marshal(m); err == nil || err.Error() != werr.Error() {
			t.Fatalf("%T: the marshaler's error %v, protojson's %v", m, err, werr)
		}
	default:
		if !sameJSON(got, want) {
			t.Fatalf("%T: not protojson's JSON\n got %s\nwant %s", m, got, want)
		}
		if b, err := gatewayJSON().Marshal(m); err != nil || !bytes.Equal(b, got) {
			t.Fatalf("%T: the marshaler wrote %s (%v), want %s", m, b, err, got)
		}
	}
	return got, ok
}

// TestGatewayMarshalerAllocations holds the gateway's marshaler to one
// allocation for a receipt's answer, the copy out of its pooled buffer
// (protojson's took 156), and to protojson's bytes for any other message
// and under any other options.
func TestGatewayMarshalerAllocations(t *testing.T) {
	j := gatewayJSON()
	m := &ledgerv1.AppendReceiptResponse{Row: receiptRow(), Outcome: ledgerv1.AppendOutcome(1)}
	if n := testing.AllocsPerRun(200, func() {
		if _, err := j.Marshal(m); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Fatalf("a receipt's answer took %.0f allocations, want 1", n)
	}
	// The answer is a copy: the next one, written into the same pooled
	// buffer, leaves it as it was.
	first, err := j.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	kept := bytes.Clone(first)
	if _, err := j.Marshal(&ledgerv1.GetRowResponse{Row: &ledgerv1.Row{Id: strings.Repeat("z", len(first))}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, kept) {
		t.Fatal("the marshaler's answer changed with the next one: it shares the pooled buffer")
	}
	// Options other than the gateway's are protojson's to apply.
	named := jsonBody{&runtime.JSONPb{MarshalOptions: protojson.MarshalOptions{EmitUnpopulated: true, UseProtoNames: true}}}
	got, err := named.Marshal(m)
	if want, werr := named.JSONPb.Marshal(m); err != nil || werr != nil || !bytes.Equal(got, want) {
		t.Fatalf("UseProtoNames: %s (%v), want protojson's %s (%v)", got, err, want, werr)
	}
	other := &ledgerv1.GetGrantResponse{}
	got, err = j.Marshal(other)
	want, werr := j.JSONPb.Marshal(other)
	if err != nil || werr != nil || !bytes.Equal(got, want) {
		t.Fatalf("another message: %s (%v), want protojson's %s (%v)", got, err, want, werr)
	}
}

// sameJSON reports whether two JSON texts are the same bytes once the
// spacing is taken out: names, values, escapes and order.
func sameJSON(got, want []byte) bool {
	var g, w bytes.Buffer
	return json.Compact(&g, got) == nil && json.Compact(&w, want) == nil && bytes.Equal(g.Bytes(), w.Bytes())
}

func prototextOf(m proto.Message) string {
	b, _ := protojson.MarshalOptions{AllowPartial: true}.Marshal(m)
	return string(b)
}

var (
	timestampName = (&timestamppb.Timestamp{}).ProtoReflect().Descriptor().FullName()
	durationName  = (&durationpb.Duration{}).ProtoReflect().Descriptor().FullName()
)

// fill sets every field of m at random: messages left unset one time in
// five (below the top), lists of zero to three, strings with characters
// JSON escapes and, rarely, bytes that are not UTF-8, enum numbers with no
// name, times and durations now and then out of protojson's range. A field
// of a kind it does not know fails the test.
func fill(t *testing.T, rng *rand.Rand, m protoreflect.Message, depth int) {
	t.Helper()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			t.Fatalf("%s: a map field; fill does not know it", fd.FullName())
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range rng.IntN(4) {
				if fd.Message() != nil {
					e := l.NewElement()
					fillValue(t, rng, e.Message(), depth+1)
					l.Append(e)
				} else {
					l.Append(scalar(t, rng, fd))
				}
			}
		case fd.Message() != nil:
			if depth > 0 && rng.IntN(5) == 0 {
				continue
			}
			fillValue(t, rng, m.Mutable(fd).Message(), depth+1)
		default:
			m.Set(fd, scalar(t, rng, fd))
		}
	}
}

func fillValue(t *testing.T, rng *rand.Rand, m protoreflect.Message, depth int) {
	switch m.Descriptor().FullName() {
	case timestampName:
		secs := minTimestampSeconds + rng.Int64N(maxTimestampSeconds-minTimestampSeconds+1)
		if rng.IntN(200) == 0 {
			secs = maxTimestampSeconds + 1 + rng.Int64N(1000)
		}
		m.Interface().(*timestamppb.Timestamp).Seconds = secs
		m.Interface().(*timestamppb.Timestamp).Nanos = nanos(rng)
	case durationName:
		secs := rng.Int64N(2*maxDurationSeconds+1) - maxDurationSeconds
		if rng.IntN(4) == 0 {
			secs = rng.Int64N(7200)
		}
		d := m.Interface().(*durationpb.Duration)
		d.Seconds, d.Nanos = secs, nanos(rng)
		if secs < 0 || (secs == 0 && rng.IntN(2) == 0) {
			d.Nanos = -d.Nanos
		}
		if rng.IntN(200) == 0 {
			d.Seconds = maxDurationSeconds + 1
		}
	default:
		fill(t, rng, m, depth)
	}
}

// nanos returns nanoseconds of 0, 3, 6 or 9 digits, now and then one out
// of range.
func nanos(rng *rand.Rand) int32 {
	switch rng.IntN(5) {
	case 0:
		return 0
	case 1:
		return int32(rng.IntN(1000)) * 1e6
	case 2:
		return int32(rng.IntN(1e6)) * 1e3
	case 3:
		if rng.IntN(100) == 0 {
			return 1e9 + int32(rng.IntN(10))
		}
	}
	return int32(rng.IntN(1e9))
}

var pieces = []string{"a", "Zz", "0", " ", "\"", "\\", "/", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f",
	"<", ">", "&", "é", "\u2028", "\u2029", "日本", "😀", "\ufffd", "sha256:", "https://brand.example/pact"}

func scalar(t *testing.T, rng *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		if rng.IntN(300) == 0 {
			b.WriteString("\xff")
		}
		return protoreflect.ValueOfString(b.String())
	case protoreflect.EnumKind:
		values := fd.Enum().Values()
		if rng.IntN(20) == 0 {
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(100 + rng.IntN(5)))
		}
		return protoreflect.ValueOfEnum(values.Get(rng.IntN(values.Len())).Number())
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(int32(rng.Uint32()))
	}
	t.Fatalf("%s: a %s field; fill does not know it", fd.FullName(), fd.Kind())
	return protoreflect.Value{}
}

// receiptRow is a row as a receipt's answer carries it.
func receiptRow() *ledgerv1.Row {
	h := strings.Repeat("ab", 32)
	at := timestamppb.New(time.Date(2026, 12, 3, 10, 11, 12, 345678000, time.UTC))
	var checks []*ledgerv1.Check
	for _, n := range []string{"receipt_signature", "receipt_alg", "request_jwt_signature", "delegation_token_signature",
		"token_valid_at_ts", "scopes", "bindings", "grant_not_revoked", "args_hash"} {
		checks = append(checks, &ledgerv1.Check{Name: n, Result: ledgerv1.CheckResult_CHECK_RESULT_PASS, Detail: "kid brand-key-2026-11 in snapshot sha256:" + h[:16]})
	}
	return &ledgerv1.Row{Id: h, ReceiptId: "sha256:" + h, Kind: ledgerv1.RowKind_ROW_KIND_RECEIPT, Status: ledgerv1.RowStatus_ROW_STATUS_AUTHORIZED,
		GrantId: "grant-0001234", Principal: "user-42", Brand: "https://brand.example/pact",
		Agent:        &ledgerv1.Agent{Platform: "https://agent.example", RequestJwtKid: "agent-key-1", JwksSnapshot: "sha256:" + h},
		BrandKey:     &ledgerv1.BrandKey{Kid: "brand-key-2026-11", JwksSnapshot: "sha256:" + h},
		ScopeGranted: []string{"orders:read", "refunds:create", "profile:read"}, ScopesUsed: []string{"refunds:create"},
		Limits:   &ledgerv1.Limits{AmountMax: "50.00 EUR", CountMax: 3, GrantExpires: at},
		Actions:  []*ledgerv1.RowAction{{Tool: "refunds.create", Target: "order-991", ArgsHash: h, ArgsHashSource: 1, TargetSource: 2}},
		IssuedAt: at, RecordedAt: at, Verifier: &ledgerv1.Verifier{CheckedBy: "pactledger 1.0", CheckedAt: at, Checks: checks},
		RetentionClass: 1, RetainUntil: at, EvidenceSha256: h, ContextId: "ctx-1", MessageId: "msg-1"}
}

// BenchmarkRowMessagesJSON times a receipt's answer and a page of 100 rows
// both ways in the same run: protojson (the gateway's marshaler before)
// and the marshaler now.
func BenchmarkRowMessagesJSON(b *testing.B) {
	page := &ledgerv1.ListRowsResponse{NextPageToken: "token"}
	for range 100 {
		page.Rows = append(page.Rows, receiptRow())
	}
	for _, c := range []struct {
		name string
		m    proto.Message
	}{{"receipt", &ledgerv1.AppendReceiptResponse{Row: receiptRow(), Outcome: 1}}, {"page-of-100", page}} {
		b.Run(c.name+"/protojson", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := gatewayJSON().JSONPb.Marshal(c.m); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/direct", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := gatewayJSON().Marshal(c.m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
