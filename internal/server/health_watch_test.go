package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/server"
)

// A health watch needs no key and never ends on its own, and an open one
// keeps its connection from being closed as idle: a ledgerd serves
// MaxKeylessWatches of them at once without a key, refuses more
// RESOURCE_EXHAUSTED, serves a watch with a key whatever the count, and
// serves a keyless one again once another has ended.
func TestKeylessHealthWatchesAreBounded(t *testing.T) {
	e := newEnv(t, jose.ES256)
	h := healthpb.NewHealthClient(dial(t, e))
	watch := func(ctx context.Context) (healthpb.Health_WatchClient, error) {
		w, err := h.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return nil, err
		}
		_, err = w.Recv()
		return w, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, cancelFirst := context.WithCancel(ctx)
	if _, err := watch(first); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < server.MaxKeylessWatches; i++ {
		if _, err := watch(ctx); err != nil {
			t.Fatalf("keyless watch %d of %d: %v", i+1, server.MaxKeylessWatches, err)
		}
	}
	if _, err := watch(ctx); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("keyless watch %d: %v, want RESOURCE_EXHAUSTED", server.MaxKeylessWatches+1, err)
	}
	if _, err := watch(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+keys["support"])); err != nil {
		t.Fatalf("a watch with a key past the keyless bound: %v", err)
	}
	if _, err := h.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a keyless check past the bound: %v", err)
	}
	cancelFirst()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := watch(ctx)
		if err == nil {
			break
		}
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("a keyless watch after one ended: %v", err)
		}
	}
}
