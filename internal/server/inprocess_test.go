package server

import (
	"context"
	"errors"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A call in process runs through the interceptors in order, sees the
// caller's outgoing metadata as incoming (and none as outgoing), and comes
// back as a client over a connection gets it: the reply merged into the
// caller's message, errors as gRPC statuses.
func TestInProcessCallsGoThroughTheInterceptors(t *testing.T) {
	hs := health.NewServer()
	hs.SetServingStatus("ledger", healthpb.HealthCheckResponse_SERVING)
	var order []string
	var seen metadata.MD
	var method string
	mark := func(name string) grpc.UnaryServerInterceptor {
		return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			order = append(order, name)
			return handler(ctx, req)
		}
	}
	gate := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		method = info.FullMethod
		seen, _ = metadata.FromIncomingContext(ctx)
		if out, ok := metadata.FromOutgoingContext(ctx); ok && len(out) > 0 {
			return nil, status.Error(codes.Internal, "outgoing metadata passed on")
		}
		if seen.Get("authorization") == nil {
			return nil, status.Error(codes.Unauthenticated, "no key")
		}
		return handler(ctx, req)
	}
	c := newInProcess(mark("first"), gate, mark("last"))
	c.register(&healthpb.Health_ServiceDesc, hs)
	client := healthpb.NewHealthClient(c)

	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer k")
	got, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "ledger"})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if got.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("status = %v, want SERVING", got.GetStatus())
	}
	if want := []string{"first", "last"}; !slices.Equal(order, want) {
		t.Errorf("interceptors ran %v, want %v", order, want)
	}
	if method != healthpb.Health_Check_FullMethodName {
		t.Errorf("FullMethod = %q", method)
	}
	if v := seen.Get("authorization"); !slices.Equal(v, []string{"Bearer k"}) {
		t.Errorf("incoming authorization = %v", v)
	}

	tests := []struct {
		name string
		ctx  context.Context
		req  *healthpb.HealthCheckRequest
		want codes.Code
	}{
		{"refused by an interceptor", context.Background(), &healthpb.HealthCheckRequest{Service: "ledger"}, codes.Unauthenticated},
		{"a status from the service", ctx, &healthpb.HealthCheckRequest{Service: "nothing"}, codes.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Check(tc.ctx, tc.req)
			if got := status.Code(err); got != tc.want {
				t.Errorf("code = %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

// A handler's plain error becomes a status as the gRPC server makes it:
// a context's error keeps its code, anything else is Unknown.
func TestInProcessPlainErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{{context.Canceled, codes.Canceled}, {context.DeadlineExceeded, codes.DeadlineExceeded}, {errors.New("boom"), codes.Unknown}} {
		c := newInProcess(func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) { return nil, tc.err })
		c.register(&healthpb.Health_ServiceDesc, health.NewServer())
		_, err := healthpb.NewHealthClient(c).Check(context.Background(), &healthpb.HealthCheckRequest{})
		if got := status.Code(err); got != tc.want {
			t.Errorf("%v: code %v, want %v", tc.err, got, tc.want)
		}
	}
	c := newInProcess()
	if err := c.Invoke(context.Background(), "/nothing/Here", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("unknown method: %v", err)
	}
	if _, err := c.NewStream(context.Background(), &grpc.StreamDesc{}, "/grpc.health.v1.Health/Watch"); status.Code(err) != codes.Unimplemented {
		t.Errorf("stream: %v", err)
	}
}
