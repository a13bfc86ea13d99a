// Package cluster tests ledgerd run as several replicas on one PostgreSQL
// database and one S3 bucket with Object Lock, as docs/operations.md
// ("Running more than one ledgerd") describes: writers spread across the
// replicas, the same receipt posted to two replicas at once, a replica
// killed with SIGKILL under load, a failover of the database to its
// synchronous standby, and the database stopped and started again. The
// package holds tests only.
package cluster
