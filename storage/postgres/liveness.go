package postgres

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Liveness: a replica that vanishes (a network partition, a host that
// froze or lost power) closes nothing, and neither end hears of it. Left
// alone, the server keeps such a replica's session and its open
// transaction, with every row lock it took (a fenced write's lock on its
// lease's row among them), until the operating system gives the
// connection up: two hours of TCP keepalive by default. The other way
// round, a replica waits for a silent server until its kernel stops
// retransmitting, about fifteen minutes. Everything here is derived from
// Config.CommitTimeout, the longest the store waits for the database at a
// time:
//
//   - each write transaction sets idle_in_transaction_session_timeout to
//     CommitTimeout (runBatch): its client gives up on it by then, so the
//     server ends one idle that long, and its locks go with it;
//   - each session asks the server for TCP keepalives and a TCP user
//     timeout (serverLiveness), and each connection has them on the
//     replica's side too (dialer), so that either end drops a connection
//     whose peer stopped answering after about CommitTimeout.

// keepalive returns the TCP keepalive idle time and interval for commit
// (CommitTimeout), in whole seconds as the server takes them: with
// keepaliveProbes unanswered probes a silent peer is found out after
// about commit.
func keepalive(commit time.Duration) time.Duration {
	return max(time.Second, (commit / 4).Round(time.Second))
}

// keepaliveProbes is how many keepalive probes go unanswered before a
// connection counts as dead.
const keepaliveProbes = 3

// serverLiveness returns the AfterConnect hook that asks the server to
// keep the session's connection alive and drop it once the replica stops
// answering: tcp_keepalives_idle, tcp_keepalives_interval,
// tcp_keepalives_count and tcp_user_timeout. A setting is left alone when
// the server does not have it (an older server, an engine that only
// speaks PostgreSQL's protocol) or when its value comes from anywhere but
// the server's built-in default (its configuration file, the role, the
// database, the DSN's options): those are the operator's. They are set
// after connecting rather than as startup parameters, which poolers such
// as PgBouncer refuse.
func serverLiveness(commit time.Duration) func(context.Context, *pgx.Conn) error {
	k := strconv.Itoa(int(keepalive(commit) / time.Second))
	names := []string{"tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout"}
	values := []string{k, k, strconv.Itoa(keepaliveProbes), strconv.FormatInt(commit.Milliseconds(), 10)}
	return func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `
SELECT count(set_config(s.name, v.value, false))
FROM unnest($1::text[], $2::text[]) AS v(name, value) JOIN pg_settings s ON s.name = v.name
WHERE s.source = 'default'`, names, values)
		if err != nil {
			return fmt.Errorf("set the session's TCP keepalives: %w", err)
		}
		return nil
	}
}

// dialer returns the dialer of the store's connections: connect bounds
// opening one, and TCP keepalives (and, on Linux, a TCP user timeout) drop
// one whose server stopped answering after about commit.
func dialer(connect, commit time.Duration) *net.Dialer {
	k := keepalive(commit)
	return &net.Dialer{
		Timeout:         connect,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: k, Interval: k, Count: keepaliveProbes},
		Control:         userTimeout(commit),
	}
}
