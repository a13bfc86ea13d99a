package server_test

import (
	"testing"

	"github.com/pactledger/pactledger/internal/freeport"
)

// freeAddr returns a free loopback address.
func freeAddr(t *testing.T) string {
	t.Helper()
	return freeport.Addr(t)
}
