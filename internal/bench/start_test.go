package bench

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
)

// A ledgerd that exits before it is ready (here a program that exits at
// once) is told at once as errExited, not after the minutes of waiting
// for /readyz, started for the served phases or as a store's replica (whose
// stop still returns); the starts are tried again with new ports, three
// times in all, and a start that fails otherwise is not.
func TestLedgerdExitedBeforeReady(t *testing.T) {
	exit, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false(1) on this machine")
	}
	starts := map[string]func(config.Config) error{
		"served": func(cfg config.Config) error {
			_, err := startLedgerdAt(context.Background(), exit, "unused.yaml", cfg, nil, nil)
			return err
		},
		"store": func(cfg config.Config) error {
			cfg.DataDir = t.TempDir()
			_, err := startStoreDaemon(context.Background(), exit, cfg)
			return err
		},
	}
	for name, start := range starts {
		t.Run(name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Listen.GRPC, cfg.Listen.HTTP = "127.0.0.1:1", "127.0.0.1:1"
			done := make(chan error, 1)
			go func() { done <- start(cfg) }()
			select {
			case err := <-done:
				if !errors.Is(err, errExited) {
					t.Fatalf("start of a program that exits: %v, want errExited", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("the start waited for /readyz of a program that had exited")
			}
		})
	}
	attempts := 0
	if _, err := withFreshPorts(func() (*daemon, error) { attempts++; return nil, errExited }); !errors.Is(err, errExited) || attempts != 3 {
		t.Fatalf("%d attempts, %v; want 3 and errExited", attempts, err)
	}
	attempts = 0
	other := errors.New("no such file")
	if _, err := withFreshPorts(func() (*storeDaemon, error) { attempts++; return nil, other }); err != other || attempts != 1 {
		t.Fatalf("%d attempts, %v; want 1 and the error", attempts, err)
	}
}
