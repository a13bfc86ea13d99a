package server

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// inProcess is a grpc.ClientConnInterface that runs unary calls of the
// services registered with it in this process, through the same unary
// interceptors as the gRPC server's (authentication and roles, metrics,
// the access log): the REST gateway and the console call the API with it
// (docs/design/006-gateway-in-memory.md). A call skips what a call over a
// connection adds: HTTP/2 framing, protobuf encoding both ways and a
// goroutine hop each way.
type inProcess struct {
	methods   map[string]inProcessMethod // by full method name
	intercept grpc.UnaryServerInterceptor
}

type inProcessMethod struct {
	srv     any
	handler grpc.MethodHandler
}

var _ grpc.ClientConnInterface = (*inProcess)(nil)

// newInProcess returns a connection whose calls run through interceptors,
// in order, as grpc.ChainUnaryInterceptor runs them.
func newInProcess(interceptors ...grpc.UnaryServerInterceptor) *inProcess {
	return &inProcess{methods: map[string]inProcessMethod{}, intercept: chainUnary(interceptors)}
}

// register adds the unary methods of desc, served by srv (as
// grpc.Server.RegisterService).
func (c *inProcess) register(desc *grpc.ServiceDesc, srv any) {
	for _, m := range desc.Methods {
		c.methods["/"+desc.ServiceName+"/"+m.MethodName] = inProcessMethod{srv: srv, handler: m.Handler}
	}
}

// Invoke runs method with args and merges its response into reply. The
// caller's outgoing metadata is what the server side sees as incoming
// metadata, as over a connection, and is not passed on as outgoing.
// Errors are gRPC statuses, as a client over a connection gets them.
func (c *inProcess) Invoke(ctx context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	m, ok := c.methods[method]
	if !ok {
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	in, ok := args.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "%s: request is not a protobuf message", method)
	}
	out, ok := reply.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "%s: reply is not a protobuf message", method)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	ctx = metadata.NewIncomingContext(metadata.NewOutgoingContext(ctx, nil), md)
	// The handler decodes into a message of its own: a copy, so that
	// nothing the handler does reaches the caller's request.
	dec := func(dst any) error {
		d, ok := dst.(proto.Message)
		if !ok {
			return fmt.Errorf("%s: decode into %T", method, dst)
		}
		proto.Merge(d, in)
		return nil
	}
	resp, err := m.handler(m.srv, ctx, dec, c.intercept)
	if err != nil {
		if _, ok := status.FromError(err); !ok {
			// As the gRPC server turns a handler's plain error into a status.
			err = status.FromContextError(err).Err()
		}
		return err
	}
	r, ok := resp.(proto.Message)
	if !ok || r == nil || !r.ProtoReflect().IsValid() {
		return status.Errorf(codes.Internal, "%s: the handler returned no message", method)
	}
	proto.Reset(out)
	proto.Merge(out, r)
	return nil
}

// errNoStreams: only unary calls run in process.
var errNoStreams = status.Error(codes.Unimplemented, "streaming calls are not served in process")

// NewStream refuses: the services called in process are unary.
func (c *inProcess) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errNoStreams
}

// chainUnary runs interceptors in order around a handler, as
// grpc.ChainUnaryInterceptor does.
func chainUnary(interceptors []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	if len(interceptors) == 0 {
		return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			return handler(ctx, req)
		}
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return interceptors[0](ctx, req, info, chained(interceptors, 1, info, handler))
	}
}

// chained is the handler the i-th interceptor calls.
func chained(interceptors []grpc.UnaryServerInterceptor, i int, info *grpc.UnaryServerInfo, final grpc.UnaryHandler) grpc.UnaryHandler {
	if i == len(interceptors) {
		return final
	}
	return func(ctx context.Context, req any) (any, error) {
		return interceptors[i](ctx, req, info, chained(interceptors, i+1, info, final))
	}
}
