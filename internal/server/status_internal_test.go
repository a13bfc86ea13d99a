package server

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/ledger"
)

// A row store edited outside the ledger is answered as lost data, with
// the store's words: the row it names and that fsck lists the rest.
func TestStoreEditedIsDataLoss(t *testing.T) {
	err := fmt.Errorf("the row store's index entry for row ab12 points at another record than its id (%w; run ledgerctl fsck)", ledger.ErrStoreEdited)
	st := status.Convert((&service{log: slog.New(slog.DiscardHandler)}).toStatus(context.Background(), "ListRows", err))
	if st.Code() != codes.DataLoss || st.Message() != err.Error() {
		t.Errorf("got %v %q, want DataLoss %q", st.Code(), st.Message(), err.Error())
	}
}
