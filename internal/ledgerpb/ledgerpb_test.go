package ledgerpb

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// Each table names every value of its API enum but the unspecified one,
// once, so a value added to the API and not here is found.
func TestEveryAPIValueIsMapped(t *testing.T) {
	for _, tc := range []struct {
		enum   protoreflect.EnumDescriptor
		mapped map[protoreflect.EnumNumber]bool
	}{
		{ledgerv1.AppendOutcome(0).Descriptor(), numbers(Outcome)},
		{ledgerv1.RowStatus(0).Descriptor(), numbers(Status)},
		{ledgerv1.RetentionClass(0).Descriptor(), numbers(Class)},
		{ledgerv1.DisputeStatus(0).Descriptor(), numbers(Dispute)},
		{ledgerv1.RowKind(0).Descriptor(), numbers(Kind)},
		{ledgerv1.CheckResult(0).Descriptor(), numbers(Check)},
		{ledgerv1.ArgsHashSource(0).Descriptor(), numbers(HashSource)},
		{ledgerv1.TargetSource(0).Descriptor(), numbers(TargetSource)},
	} {
		values := tc.enum.Values()
		for i := range values.Len() {
			v := values.Get(i)
			if strings.HasSuffix(string(v.Name()), "_UNSPECIFIED") {
				if tc.mapped[v.Number()] {
					t.Errorf("%s is mapped", v.Name())
				}
				continue
			}
			if !tc.mapped[v.Number()] {
				t.Errorf("%s is in no table", v.Name())
			}
		}
	}
	if len(StatusOf) != len(Status) || len(CheckOf) != len(Check) || len(DisputeOf) != len(Dispute)-1 {
		t.Error("an inverted table lost a value: two values map to one")
	}
}

func numbers[K comparable, V interface {
	Number() protoreflect.EnumNumber
}](m map[K]V) map[protoreflect.EnumNumber]bool {
	out := make(map[protoreflect.EnumNumber]bool, len(m))
	for _, v := range m {
		out[v.Number()] = true
	}
	return out
}
