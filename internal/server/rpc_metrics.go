package server

import (
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
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
