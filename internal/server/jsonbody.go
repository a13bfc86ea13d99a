package server

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// jsonBody is the gateway's JSON marshaler with a request decoder that
// parses a body once. runtime.JSONPb's decoder scans the body with
// encoding/json into a json.RawMessage and then hands the copy to protojson,
// which parses it again: about 1.8 % of a REST write's CPU. This one reads
// the body (already bounded by limits.maxBodyBytes) and gives it to
// protojson alone. An empty body is io.EOF, an empty request, as before; a
// body with anything but space after its JSON value is refused, where the
// old decoder ignored the rest.
type jsonBody struct{ *runtime.JSONPb }

// gatewayJSON is the gateway's marshaler: every field written, unset ones
// as their zero or null; unknown fields in a request refused.
func gatewayJSON() jsonBody {
	return jsonBody{&runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}}
}

// NewDecoder returns the decoder of a request body.
func (j jsonBody) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		m, ok := v.(proto.Message)
		if !ok {
			return j.JSONPb.NewDecoder(r).Decode(v)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return io.EOF
		}
		if len(b) > scanAbove {
			if n := jsonObjects(b, maxObjects); n > maxObjects {
				return fmt.Errorf("the body holds more than %d JSON objects, more than any request takes", maxObjects)
			}
		}
		return j.UnmarshalOptions.Unmarshal(b, m)
	})
}

// A request decoded takes memory by the objects it holds (an empty
// receipt, "{}", becomes a message of about 180 bytes), not by its
// bytes: a body larger than scanAbove is refused when it holds more than
// maxObjects objects, more than any request takes (AppendReceipts: 100
// receipts of at most 64 actions each, about 6,600).
const (
	scanAbove  = 64 << 10
	maxObjects = 10_000
)

// jsonObjects counts the objects in JSON text b (the '{' outside
// strings), stopping once it passes limit. It jumps from one '{' or '"'
// to the next, and through a string from one '"' or '\\' to the next: a
// receipt's tokens are long strings.
func jsonObjects(b []byte, limit int) int {
	n := 0
	for {
		i := bytes.IndexAny(b, `{"`)
		if i < 0 {
			return n
		}
		if b[i] == '{' {
			if n++; n > limit {
				return n
			}
			b = b[i+1:]
			continue
		}
		b = b[i+1:] // inside a string
		for {
			j := bytes.IndexAny(b, `"\`)
			if j < 0 {
				return n
			}
			if b[j] == '\\' {
				b = b[min(j+2, len(b)):]
				continue
			}
			b = b[j+1:]
			break
		}
	}
}

// Marshal writes the answers that carry rows without reflection
// (appendRowMessage) and any other value as runtime.JSONPb does. The JSON
// is written into a pooled buffer and copied out at its size, so that a
// row's answer costs one allocation rather than the buffer's growth.
func (j jsonBody) Marshal(v any) ([]byte, error) {
	if !j.writesRows() {
		return j.JSONPb.Marshal(v)
	}
	bp := jsonBuffers.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledJSON {
			jsonBuffers.Put(bp)
		}
	}()
	if b, ok := appendRowMessage((*bp)[:0], v); ok {
		*bp = b
		return bytes.Clone(b), nil
	}
	return j.JSONPb.Marshal(v)
}

// writesRows reports whether the options are the ones appendRowMessage
// writes for: gatewayJSON's. Any other option is protojson's to apply.
func (j jsonBody) writesRows() bool {
	o := j.MarshalOptions
	return o.EmitUnpopulated && !o.EmitDefaultValues && !o.UseProtoNames && !o.UseEnumNumbers && !o.Multiline && o.Indent == ""
}

// maxPooledJSON is the largest buffer kept for the next answer: a page of
// a few hundred rows. A larger one is left to the collector.
const maxPooledJSON = 1 << 20

var jsonBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
