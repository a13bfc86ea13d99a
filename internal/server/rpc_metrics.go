package server

import (
	"context"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"
)

// rpcBuckets are the per-RPC latency histogram's buckets, in seconds.
var rpcBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// newRPCMetrics counts every RPC by method and code and times it: gRPC
// clients, the REST gateway and the console alike (they reach the same
// server). grpc_server_started_total, grpc_server_handled_total,
// grpc_server_handling_seconds, grpc_server_msg_{received,sent}_total.
func newRPCMetrics() *grpcprom.ServerMetrics {
	return grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(rpcBuckets)))
}

// countRefusals returns a function that counts a call refused before it
// reached the interceptors (authenticator.tap) as m counts every other
// call: started, handled with the refusal's code, timed. methods are the
// served methods' full names, so a name a client made up never becomes a
// series.
func countRefusals(m *grpcprom.ServerMetrics, services ...*grpc.ServiceDesc) func(ctx context.Context, method string, err error) {
	unary, stream := m.UnaryServerInterceptor(), m.StreamServerInterceptor()
	streams := map[string]grpc.StreamDesc{}
	for _, sd := range services {
		for _, st := range sd.Streams {
			streams["/"+sd.ServiceName+"/"+st.StreamName] = st
		}
	}
	return func(ctx context.Context, method string, err error) {
		if st, ok := streams[method]; ok {
			info := &grpc.StreamServerInfo{FullMethod: method, IsClientStream: st.ClientStreams, IsServerStream: st.ServerStreams}
			_ = stream(nil, refusedStream{ctx: ctx}, info, func(any, grpc.ServerStream) error { return err })
			return
		}
		_, _ = unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, func(context.Context, any) (any, error) { return nil, err })
	}
}

// refusedStream is the stream of a call refused before it was served: the
// metrics interceptor reads its context and nothing else.
type refusedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s refusedStream) Context() context.Context { return s.ctx }
