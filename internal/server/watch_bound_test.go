package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Health watches opened without a key are bounded across connections:
// past the bound a watch is refused RESOURCE_EXHAUSTED, while Check and a
// watch sent with a valid key are answered, and a slot freed by a watch
// that ends is taken by the next.
func TestKeylessHealthWatchesAreBounded(t *testing.T) {
	e := newEnv(t, jose.ES256)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	watch := func(ctx context.Context, conn *grpc.ClientConn) (*healthpb.HealthCheckResponse, error) {
		w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return nil, err
		}
		return w.Recv()
	}
	// A connection takes 250 calls at once: the watches take two.
	conns := []*grpc.ClientConn{dial(t, e), dial(t, e)}
	const bound = 256
	var first context.CancelFunc
	for i := range bound {
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		if i == 0 {
			first = stop
		}
		if h, err := watch(wctx, conns[i%2]); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("keyless watch %d: %v, %v", i+1, h, err)
		}
	}
	extra := dial(t, e)
	if _, err := watch(ctx, extra); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("keyless watch %d: %v; want RESOURCE_EXHAUSTED", bound+1, err)
	}
	if h, err := healthpb.NewHealthClient(extra).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check past the bound: %v, %v", h, err)
	}
	kctx, unkeyed := context.WithCancel(authCtx(ctx, "support"))
	defer unkeyed()
	if h, err := watch(kctx, extra); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("a watch with a key past the bound: %v, %v", h, err)
	}
	first()
	retry := time.NewTicker(10 * time.Millisecond)
	defer retry.Stop()
	for {
		wctx, stop := context.WithCancel(ctx)
		h, err := watch(wctx, extra)
		stop()
		if err == nil && h.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("a keyless watch after one ended: %v, %v", h, err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("a slot freed by a watch that ended was never taken")
		case <-retry.C:
		}
	}
}
