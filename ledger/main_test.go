package ledger_test

import (
	"testing"

	"github.com/pactledger/pactledger/internal/s3test"
)

var s3srv *s3test.Server

func TestMain(m *testing.M) { s3test.Main(m, &s3srv) }
