package server

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

func TestProtoObjects(t *testing.T) {
	batch := func(n int) *ledgerv1.AppendReceiptsRequest {
		req := &ledgerv1.AppendReceiptsRequest{}
		for range n {
			req.Receipts = append(req.Receipts, &ledgerv1.AppendReceiptRequest{
				ReceiptJws: "eyJ",
				Actions:    []*ledgerv1.Action{{Tool: "cancel_order", Target: "A-5531"}, {Tool: "lookup"}},
				Limits:     &ledgerv1.Limits{GrantExpires: timestamppb.Now()},
			})
		}
		return req
	}
	refusal := &ledgerv1.AppendRefusalRequest{Action: &ledgerv1.RefusalAction{Tool: "refund"}, ObservedAt: timestamppb.Now()}
	// An unknown field holding bytes counts for nothing; one the schema
	// knows as a string neither.
	unknown := protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), []byte{0x0a, 0x00})
	for _, tc := range []struct {
		name        string
		m           proto.Message
		extra       []byte
		limit, want int
	}{
		{"empty", &ledgerv1.AppendReceiptsRequest{}, nil, 10, 0},
		{"a receipt", batch(1), nil, 10, 5}, // the receipt, two actions, limits, its timestamp
		{"three receipts", batch(3), nil, 100, 15},
		{"past the limit", batch(3), nil, 7, 8}, // stops once past it
		{"a refusal", refusal, nil, 10, 2},
		{"unknown field", &ledgerv1.AppendReceiptsRequest{}, unknown, 10, 0},
		{"strings", &ledgerv1.AppendReceiptRequest{ReceiptJws: strings.Repeat("\x0a\x00", 100)}, nil, 10, 0},
	} {
		b, err := proto.Marshal(tc.m)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, tc.extra...)
		if got := protoObjects(b, tc.m.ProtoReflect().Descriptor(), tc.limit); got != tc.want {
			t.Errorf("%s: protoObjects = %d, want %d", tc.name, got, tc.want)
		}
	}
	// Bytes it cannot read are left to the decoder.
	cut := []byte{0x0a, 0x7f, 0x0a, 0x00}
	if got := protoObjects(cut, (&ledgerv1.AppendReceiptsRequest{}).ProtoReflect().Descriptor(), 10); got != 0 {
		t.Errorf("a message cut off: protoObjects = %d, want 0", got)
	}
}

// BenchmarkProtoObjects: a batch of 100 receipts, about 400 KB.
func BenchmarkProtoObjects(b *testing.B) {
	req := &ledgerv1.AppendReceiptsRequest{}
	for range 100 {
		req.Receipts = append(req.Receipts, &ledgerv1.AppendReceiptRequest{
			ReceiptJws:      strings.Repeat("eyJhbGciOiJFUzI1NiJ9", 80),
			RequestJwt:      strings.Repeat("x", 1500),
			DelegationToken: strings.Repeat("y", 1300),
			Actions:         []*ledgerv1.Action{{Tool: "cancel_order", Target: "A-5531", ArgsJson: `{"order":"A-5531"}`}},
		})
	}
	body, err := proto.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	md := req.ProtoReflect().Descriptor()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if protoObjects(body, md, maxObjects) != 200 {
			b.Fatal("count")
		}
	}
}
