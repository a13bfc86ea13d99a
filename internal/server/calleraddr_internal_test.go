package server

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"
)

// Over REST the gateway appends the remote address to X-Forwarded-For:
// the refusal log names that one, not what the client put before it.
func TestCallerAddrIsTheAddressTheGatewayForwarded(t *testing.T) {
	for _, c := range []struct {
		xff  []string
		want string
	}{
		{[]string{"203.0.113.9"}, "203.0.113.9"},
		{[]string{"198.51.100.7, 203.0.113.9"}, "203.0.113.9"},
		{[]string{"198.51.100.7", "203.0.113.9"}, "203.0.113.9"},
		{nil, ""},
	} {
		ctx := context.Background()
		if c.xff != nil {
			ctx = metadata.NewIncomingContext(ctx, metadata.MD{"x-forwarded-for": c.xff})
		}
		if got := callerAddr(ctx); got != c.want {
			t.Errorf("X-Forwarded-For %q: caller %q, want %q", c.xff, got, c.want)
		}
	}
}
