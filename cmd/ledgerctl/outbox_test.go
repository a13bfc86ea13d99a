package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
)

// TestOutboxDeadLetters: an operation on an object that was never uploaded
// moves to the dead letters without holding back the rows behind it;
// `ledgerctl outbox` shows it and `outbox retry` puts it back. Only an
// admin key may do either.
func TestOutboxDeadLetters(t *testing.T) {
	f := start(t)
	f.stop()
	store, err := bolt.Open(filepath.Join(f.cfg.DataDir, "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = store.Update(context.Background(), func(tx ledger.Tx) error {
		return tx.Enqueue(ledger.OutboxEntry{Op: ledger.OpHold, Key: "rows/never-uploaded.json"}, time.Now())
	})
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	f.serve(t)

	// poll runs `outbox` until its output holds every want, or fails.
	poll := func(want ...string) string {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			code, out, errs := f.ctl(t, "admin", "outbox")
			if code != 0 {
				t.Fatalf("outbox: %d %s %s", code, out, errs)
			}
			found := true
			for _, w := range want {
				found = found && strings.Contains(out, w)
			}
			if found {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("outbox never showed %q:\n%s", want, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	out := poll("outbox depth      0", "dead letters      1", "rows/never-uploaded.json", "never uploaded")
	if !strings.Contains(out, "hold") || !strings.Contains(out, "none (outbox empty)") {
		t.Fatalf("outbox report:\n%s", out)
	}
	// The rows queued before the stuck operation reached write-once storage.
	if code, out, _ := f.ctl(t, "auditor", "fsck"); code != 0 || !strings.Contains(out, "0 still in the outbox") {
		t.Fatalf("fsck: %d %s", code, out)
	}

	for _, role := range []string{"support", "auditor", "writer"} {
		if code, _, errs := f.ctl(t, role, "outbox"); code != exitAuth || !strings.Contains(errs, "not allowed") {
			t.Fatalf("%s reading the outbox: %d %s", role, code, errs)
		}
		if code, _, _ := f.ctl(t, role, "outbox", "retry", "--all"); code != exitAuth {
			t.Fatalf("%s retrying: %d", role, code)
		}
	}
	if code, _, _ := f.ctl(t, "admin", "outbox", "retry"); code != exitUsage {
		t.Fatalf("retry without a key: %d", code)
	}
	if code, _, _ := f.ctl(t, "admin", "outbox", "retry", "rows/other.json"); code != exitNotFound {
		t.Fatalf("retry of a key with no dead letter: %d", code)
	}
	code, out, errs := f.ctl(t, "admin", "outbox", "retry", "rows/never-uploaded.json")
	if code != 0 || !strings.Contains(out, "1 dead letters moved back") {
		t.Fatalf("retry: %d %s %s", code, out, errs)
	}
	// Still doomed: it comes back to the dead letters, counted again.
	poll("dead letters      1", "rows/never-uploaded.json")
	code, out, _ = f.ctl(t, "admin", "--json", "outbox")
	var rep struct {
		DeadLetterCount int
		DeadLetters     []struct {
			Entry    struct{ Key, Op string }
			Attempts int
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("outbox --json: %d %v %s", code, err, out)
	}
	if rep.DeadLetterCount != 1 || len(rep.DeadLetters) != 1 || rep.DeadLetters[0].Entry.Op != "hold" || rep.DeadLetters[0].Attempts != 1 {
		t.Fatalf("outbox --json: %s", out)
	}
	if code, out, _ := f.ctl(t, "admin", "outbox", "retry", "--all"); code != 0 || !strings.Contains(out, "1 dead letters moved back") {
		t.Fatalf("retry --all: %d %s", code, out)
	}
}
