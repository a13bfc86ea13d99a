package pact

import "testing"

// An outbox entry written before the outbox held refusals and revocations
// (a bare receipt) is still posted as a receipt.
func TestOutboxReadsBareReceipts(t *testing.T) {
	var it LedgerItem
	if err := decodeItem([]byte(`{"receiptJws":"a.b.c","requestJwt":"x","delegationToken":"y","actions":[]}`), &it); err != nil || it.Receipt == nil || it.Receipt.ReceiptJWS != "a.b.c" {
		t.Fatalf("bare receipt: %v %+v", err, it)
	}
	it = LedgerItem{}
	if err := decodeItem([]byte(`{"refusal":{"claimedPrincipal":"p","action":{"tool":"t"},"reason":"r"}}`), &it); err != nil || it.Refusal == nil || it.Receipt != nil {
		t.Fatalf("refusal: %v %+v", err, it)
	}
}
