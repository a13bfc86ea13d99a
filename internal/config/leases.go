package config

import (
	"errors"
	"time"
)

// Leases tunes how this ledgerd holds the leases its singleton jobs run
// under (the Merkle log's integrator, the retention sweeper, the monthly
// drill scheduler) on a row store other replicas share. The zero value is
// the default.
type Leases struct {
	// Holder names this replica to the others, in the lease table and in
	// the outbox entries its uploader claims; default
	// hostname-pid-random. No two replicas may share one.
	Holder string `yaml:"holder"`
	// TTL is how long a lease lasts unless renewed (every TTL/3): after a
	// replica dies, another takes its jobs over within TTL plus TTL/3.
	// Default 30s.
	TTL Duration `yaml:"ttl"`
}

// validateLeases checks the leases block and uploader.claimTTL.
func (c *Config) validateLeases() []error {
	var errs []error
	if ttl := time.Duration(c.Leases.TTL); ttl < 0 || (ttl > 0 && ttl < 300*time.Millisecond) {
		errs = append(errs, errors.New("leases.ttl must be at least 300ms (a lease is renewed every ttl/3), or unset for the default"))
	}
	if c.Uploader.ClaimTTL < 0 {
		errs = append(errs, errors.New("uploader.claimTTL must not be negative"))
	}
	return errs
}
