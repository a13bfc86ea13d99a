package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// A ledger whose log key is not the one that signed the row store's
// latest checkpoint (a replica given another key file) is refused at
// CheckLogKey, and should it run anyway its integrator neither signs a
// checkpoint nor publishes one: the store's and the bucket's latest stay
// the right key's. With the right key the log goes on.
func TestAnotherLogKeySignsAndPublishesNothing(t *testing.T) {
	h := newHarness(t)
	right, rightV := logKeys(t)
	if err := h.l.EnableLog(ledger.LogConfig{Signer: right, VerifierKey: rightV}); err != nil {
		t.Fatal(err)
	}
	if err := h.grow(t, 0, 3); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := h.l.CheckLogKey(ctx); err != nil {
		t.Fatalf("CheckLogKey with the key that signed the log: %v", err)
	}
	before, err := h.l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	published := readObject(t, h.objDir, ledger.LogPrefix+"checkpoint")

	for i, withVerifier := range []bool{true, false} {
		wrong, wrongV := logKeys(t)
		cfg := ledger.LogConfig{Signer: wrong}
		if withVerifier {
			cfg.VerifierKey = wrongV
		}
		if err := h.l.EnableLog(cfg); err != nil {
			t.Fatal(err)
		}
		wrongName, rightName := keyName(wrongV), keyName(rightV)
		err := h.l.CheckLogKey(ctx)
		if !errors.Is(err, ledger.ErrLogKey) || !strings.Contains(err.Error(), "signed by "+rightName+", not by this ledger's log key "+wrongName) {
			t.Errorf("CheckLogKey with another key (verifier key given: %v): %v", withVerifier, err)
		}
		h.queue(t, 3+i, 1)
		if _, err := h.l.Integrate(ctx); !errors.Is(err, ledger.ErrLogKey) {
			t.Errorf("Integrate with another key (verifier key given: %v): %v; want ErrLogKey", withVerifier, err)
		}
		if err := h.l.PublishTiles(ctx); !errors.Is(err, ledger.ErrLogKey) {
			t.Errorf("PublishTiles with another key (verifier key given: %v): %v; want ErrLogKey", withVerifier, err)
		}
		if cp, _ := h.l.Checkpoint(ctx); !bytes.Equal(cp, before) {
			t.Errorf("a ledger with another key signed a checkpoint:\n%s", cp)
		}
		if got := readObject(t, h.objDir, ledger.LogPrefix+"checkpoint"); !bytes.Equal(got, published) {
			t.Errorf("a ledger with another key replaced the bucket's checkpoint:\n%s", got)
		}
	}

	if err := h.l.EnableLog(ledger.LogConfig{Signer: right, VerifierKey: rightV}); err != nil {
		t.Fatal(err)
	}
	if n, err := h.l.Integrate(ctx); err != nil || n != 2 {
		t.Fatalf("Integrate with the right key: %d leaves, %v", n, err)
	}
	if err := h.l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
	if c := checkpointOf(t, h, rightV); c.Size != 5 {
		t.Errorf("the log under the right key has %d leaves, want 5", c.Size)
	}
}

// keyName is the origin+hash a verifier key begins with.
func keyName(vkey string) string {
	parts := strings.SplitN(vkey, "+", 3)
	return parts[0] + "+" + parts[1]
}

// A ledger given another key than the one that signed the row store's
// log says so while another holds the integrator's lease, not only once it
// takes the lease: it checks the log's checkpoint every interval.
func TestAnotherLogKeyIsFoundWithoutTheLease(t *testing.T) {
	h := newHarness(t)
	right, rightV := logKeys(t)
	if err := h.l.EnableLog(ledger.LogConfig{Signer: right, VerifierKey: rightV, Interval: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := h.grow(t, 0, 2); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { _ = h.l.RunIntegrator(ctx) })
	h.within(t, "the ledger with the right key taking the integrator's lease", func() bool {
		_, held := h.l.LeaseHeld(ledger.LeaseLogIntegrator)
		return held
	})

	other := h.another(t, h.store, ledger.LeaseConfig{Holder: "wrong-key", TTL: time.Minute})
	wrong, wrongV := logKeys(t)
	if err := other.EnableLog(ledger.LogConfig{Signer: wrong, VerifierKey: wrongV, Interval: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = other.RunIntegrator(ctx) })
	h.within(t, "a ledger with another log key finding it while another holds the lease", func() bool {
		_, err := other.LogKeyRefused()
		return errors.Is(err, ledger.ErrLogKey)
	})
	if _, err := h.l.LogKeyRefused(); err != nil {
		t.Fatalf("the ledger with the right key: %v", err)
	}
	if _, held := h.l.LeaseHeld(ledger.LeaseLogIntegrator); !held {
		t.Fatal("the lease left the ledger with the right key")
	}
}
