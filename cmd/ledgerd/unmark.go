package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pactledger/pactledger/storage/bolt"
)

// unmarkUsage heads `ledgerd unmark-moved --help`.
const unmarkUsage = `usage: ledgerd unmark-moved [bbolt:]PATH

For a rollback after a move into PostgreSQL, with every ledgerd on the
database stopped: clear the bbolt file's mark that it was moved, so that
ledgerd serves the file again. The rows written on the database since
the move are not in the file. Refused while another process has the
file open.

flags:
`

// unmarkLockWait bounds unmark-moved's wait for the file's lock, as
// ledgerd's open of the file is bounded; tests shorten it.
var unmarkLockWait = 5 * time.Second

// unmarkMoved runs `ledgerd unmark-moved PATH`: the way back to a bbolt
// file a move into PostgreSQL marked (bolt.MarkMoved), which ledgerd
// otherwise refuses to serve. It is a command run once rather than a
// flag of serving, so that going back is decided once and on purpose: a
// flag left in a service's command line would let a ledgerd on the file
// start again beside the one on the database on every start.
func unmarkMoved(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ledgerd unmark-moved", flag.ContinueOnError)
	if err := parseFlags(fs, args, unmarkUsage, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		return errors.New("usage: ledgerd unmark-moved [bbolt:]PATH (the bbolt file a move marked: store.path, by default <dataDir>/ledger.db)")
	}
	path := strings.TrimPrefix(fs.Arg(0), "bbolt:")
	m, err := bolt.ClearMoved(path, unmarkLockWait)
	if errors.Is(err, bolt.ErrLocked) {
		return fmt.Errorf("%w: stop the process that has it open (a ledgerd, ledgerd compact or migrate --from) first; the mark was left as it was", err)
	}
	if err != nil {
		return err
	}
	if m == nil {
		_, err = fmt.Fprintf(stdout, "%s carries no mark of a move: nothing to do\n", path)
		return err
	}
	where := "another store"
	if m.Database != "" {
		where = fmt.Sprintf("%s (%s), marked at %s", m.Store, m.Database, m.At.UTC().Format(time.RFC3339))
	}
	_, err = fmt.Fprintf(stdout, "cleared the mark: %s was moved to %s; ledgerd serves the file again. The rows written on that database since the move are not in this file: keep every ledgerd on the database stopped\n", path, where)
	return err
}
