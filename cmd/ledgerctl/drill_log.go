package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// printDrillLog prints where a drill report's rows are in the Merkle log.
func (c *cli) printDrillLog(d *ledgerv1.DrillReport) {
	if d.GetCheckpoint() == "" {
		return
	}
	lines := strings.SplitN(d.GetCheckpoint(), "\n", 3)
	size := "?"
	if len(lines) > 1 {
		size = lines[1]
	}
	proven := 0
	for _, p := range d.GetProofs() {
		if p.GetBundle() != "" {
			proven++
		}
	}
	printf(c.out, "\nMerkle log: checkpoint of size %s; inclusion proofs for %d of %s", size, proven, plural(len(d.GetProofs()), "row"))
	if proven > 0 {
		fmt.Fprint(c.out, " (--proof-dir DIR writes them, as DIR/ROW.proof; check one with ledgerctl proof verify DIR/ROW.proof --log-key KEY --row ROW)")
	}
	fmt.Fprintln(c.out)
	for _, p := range d.GetProofs() {
		if p.GetBundle() == "" {
			printf(c.out, "  %s: %s\n", short(p.GetRowId()), p.GetDetail())
		}
	}
}

// writeProofs writes each drilled row's proof bundle to dir/<row>.proof
// and returns how many it wrote.
func (c *cli) writeProofs(dir string, d *ledgerv1.DrillReport) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("proof dir: %w", err)
	}
	n := 0
	for _, p := range d.GetProofs() {
		if p.GetBundle() == "" {
			continue
		}
		if len(p.GetRowId()) != 64 || strings.Trim(p.GetRowId(), "0123456789abcdef") != "" {
			return n, fmt.Errorf("proof for %q: not a row id", p.GetRowId())
		}
		if err := os.WriteFile(filepath.Join(dir, p.GetRowId()+".proof"), []byte(p.GetBundle()), 0o644); err != nil {
			return n, fmt.Errorf("write proof: %w", err)
		}
		n++
	}
	printf(c.errw, "wrote %s to %s\n", plural(n, "proof file"), dir)
	return n, nil
}
