package server

import (
	"bytes"
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// protoBody is the gRPC server's codec: gRPC's protobuf codec with a
// request decoder that counts the messages a large request holds before
// it decodes it. A message decoded takes memory by the messages it holds
// (an empty receipt, two bytes on the wire, becomes about 200), not by its
// bytes, so a request over scanAbove bytes holding more than maxObjects
// messages, more than any request takes, is left undecoded, as a body of
// JSON objects is over REST. gRPC turns a decoding error into Internal
// before any interceptor sees the call, so the codec marks the empty
// message instead (refusedMark, as its only unknown field), and the unary
// interceptor and the stream's RecvMsg refuse a marked request with
// InvalidArgument, counted as any refusal. The mark lives and dies with
// the message: a call that ends before an interceptor sees it (a second
// message on a unary call, a reset) leaves nothing behind. A client that
// sends the mark itself is refused the same way.
type protoBody struct{ encoding.CodecV2 }

func newProtoBody() protoBody {
	return protoBody{CodecV2: encoding.GetCodecV2(grpcproto.Name)}
}

// refusedMark is the unknown field a refused request holds: field
// 536870911 (the largest number a field may have) with a note.
var refusedMark = protowire.AppendString(protowire.AppendTag(nil, protowire.MaxValidNumber, protowire.BytesType), "pactledger: too many messages")

// errTooManyMessages is the refusal of a marked request.
var errTooManyMessages = status.Errorf(codes.InvalidArgument, "the message holds more than %d protobuf messages, more than any request takes", maxObjects)

// Unmarshal decodes a request, or leaves it empty and marked.
func (c protoBody) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok || data.Len() <= scanAbove {
		return c.CodecV2.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	if n := protoObjects(b, m.ProtoReflect().Descriptor(), maxObjects); n > maxObjects {
		proto.Reset(m)
		m.ProtoReflect().SetUnknown(refusedMark)
		return nil
	}
	return proto.Unmarshal(b, m)
}

// refused returns the refusal of request m when the codec marked it.
func refused(m any) error {
	if pm, ok := m.(proto.Message); ok && bytes.Equal(pm.ProtoReflect().GetUnknown(), refusedMark) {
		return errTooManyMessages
	}
	return nil
}

// unary refuses a call whose request was left undecoded.
func (protoBody) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := refused(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// stream refuses a stream's message that was left undecoded.
func (protoBody) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, checkedStream{ss})
}

type checkedStream struct{ grpc.ServerStream }

func (s checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return refused(m)
}

// protoObjects counts the messages in the protobuf encoding b of a message
// of type md (the nested messages, map entries included), stopping once it
// passes limit. What it cannot read it leaves to the decoder to refuse.
// The ledger's messages do not hold themselves, so the nesting it follows
// is the schema's; it stops at maxNesting all the same.
func protoObjects(b []byte, md protoreflect.MessageDescriptor, limit int) int {
	const maxNesting = 32
	n := 0
	var walk func(b []byte, md protoreflect.MessageDescriptor, depth int) bool
	walk = func(b []byte, md protoreflect.MessageDescriptor, depth int) bool {
		if depth > maxNesting {
			return true
		}
		fields := md.Fields()
		for len(b) > 0 {
			num, typ, l := protowire.ConsumeTag(b)
			if l < 0 {
				return true
			}
			b = b[l:]
			if typ != protowire.BytesType {
				if l = protowire.ConsumeFieldValue(num, typ, b); l < 0 {
					return true
				}
				b = b[l:]
				continue
			}
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return true
			}
			b = b[l:]
			fd := fields.ByNumber(num)
			if fd == nil || fd.Kind() != protoreflect.MessageKind {
				continue
			}
			if n++; n > limit || !walk(v, fd.Message(), depth+1) {
				return false
			}
		}
		return true
	}
	walk(b, md, 0)
	return n
}
