//go:build !linux

package postgres

import (
	"syscall"
	"time"
)

// userTimeout returns nil: TCP_USER_TIMEOUT is Linux's, and elsewhere the
// keepalives alone find a silent server.
func userTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
