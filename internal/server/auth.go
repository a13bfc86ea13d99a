package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/pactledger/pactledger/internal/config"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// methodRoles is the role table of API.md: which roles may call each RPC.
// An RPC missing from it is refused to everyone.
var methodRoles = map[string][]string{
	ledgerv1.LedgerService_AppendReceipt_FullMethodName:         {config.RoleWriter},
	ledgerv1.LedgerService_AppendReceipts_FullMethodName:        {config.RoleWriter},
	ledgerv1.LedgerService_AppendReceiptStream_FullMethodName:   {config.RoleWriter},
	ledgerv1.LedgerService_AppendRefusal_FullMethodName:         {config.RoleWriter},
	ledgerv1.LedgerService_GetRow_FullMethodName:                {config.RoleSupport, config.RoleAuditor, config.RoleAdmin},
	ledgerv1.LedgerService_ListRows_FullMethodName:              {config.RoleSupport, config.RoleAuditor, config.RoleAdmin},
	ledgerv1.LedgerService_GetEvidence_FullMethodName:           {config.RoleSupport, config.RoleAuditor, config.RoleAdmin},
	ledgerv1.LedgerService_GetJwksSnapshot_FullMethodName:       {config.RoleSupport, config.RoleAuditor, config.RoleAdmin},
	ledgerv1.LedgerService_VerifyRow_FullMethodName:             {config.RoleSupport, config.RoleAuditor, config.RoleAdmin},
	ledgerv1.LedgerService_AppendDisputeEvent_FullMethodName:    {config.RoleSupport, config.RoleAdmin},
	ledgerv1.LedgerService_RunDrill_FullMethodName:              {config.RoleSupport, config.RoleAdmin},
	ledgerv1.LedgerService_GetDrill_FullMethodName:              {config.RoleSupport, config.RoleAuditor, config.RoleAdmin},
	ledgerv1.LedgerService_ListDrills_FullMethodName:            {config.RoleSupport, config.RoleAuditor, config.RoleAdmin},
	ledgerv1.LedgerService_RevokeGrant_FullMethodName:           {config.RoleWriter, config.RoleAdmin},
	ledgerv1.LedgerService_GetGrant_FullMethodName:              {config.RoleSupport, config.RoleAuditor, config.RoleAdmin},
	ledgerv1.LedgerService_ListRevocations_FullMethodName:       {config.RoleSupport, config.RoleAuditor, config.RoleAdmin},
	ledgerv1.LedgerService_CheckIntegrity_FullMethodName:        {config.RoleAuditor, config.RoleAdmin},
	ledgerv1.LedgerService_RestoreEvidence_FullMethodName:       {config.RoleAdmin},
	ledgerv1.LedgerService_ListIncidents_FullMethodName:         {config.RoleSupport, config.RoleAuditor, config.RoleAdmin},
	ledgerv1.LedgerService_GetIncident_FullMethodName:           {config.RoleSupport, config.RoleAuditor, config.RoleAdmin},
	ledgerv1.LedgerService_CloseIncident_FullMethodName:         {config.RoleAdmin},
	ledgerv1.LedgerService_Sweep_FullMethodName:                 {config.RoleAdmin, config.RoleAuditor}, // auditors: dry runs only
	ledgerv1.LedgerService_GetOutbox_FullMethodName:             {config.RoleAdmin},
	ledgerv1.LedgerService_RetryDeadLetters_FullMethodName:      {config.RoleAdmin},
	ledgerv1.LedgerService_GetRowProof_FullMethodName:           {config.RoleSupport, config.RoleAuditor, config.RoleAdmin},
	ledgerv1.LedgerService_WhoAmI_FullMethodName:                config.Roles, // any valid key
	ledgerv1.LedgerService_ListAccessLog_FullMethodName:         {config.RoleAdmin},
	ledgerv1.LedgerService_GetProviderOutbox_FullMethodName:     {config.RoleAdmin},
	ledgerv1.LedgerService_RetryProviderSetAside_FullMethodName: {config.RoleAdmin},
}

// publicMethods need no key.
var publicMethods = map[string]bool{
	"/grpc.health.v1.Health/Check": true,
	"/grpc.health.v1.Health/Watch": true,
	"/grpc.health.v1.Health/List":  true,
	// The log's checkpoints and consistency proofs are public: anyone may
	// check that the log only grows.
	ledgerv1.LedgerService_GetCheckpoint_FullMethodName:       true,
	ledgerv1.LedgerService_GetConsistencyProof_FullMethodName: true,
}

type principal struct {
	name  string
	roles []string
}

type principalKey struct{}

// caller returns the name of the authenticated key.
func caller(ctx context.Context) string {
	if p, ok := ctx.Value(principalKey{}).(principal); ok {
		return p.name
	}
	return ""
}

// hasRole reports whether the authenticated caller holds role.
func hasRole(ctx context.Context, role string) bool {
	p, ok := ctx.Value(principalKey{}).(principal)
	return ok && slices.Contains(p.roles, role)
}

// authenticator maps key hashes to principals.
type authenticator struct {
	keys map[[32]byte]principal
	// refused, when set, counts a call tap refused.
	refused func(ctx context.Context, method string, err error)
	// refusals, when set, logs every refusal.
	refusals *refusalLog
	// keylessWatches holds a slot for each health watch open without a
	// key the ledger knows (maxKeylessWatches).
	keylessWatches chan struct{}
}

// healthWatch is the gRPC health service's stream, which needs no key.
const healthWatch = "/grpc.health.v1.Health/Watch"

// maxKeylessWatches is how many health watches callers without a known
// key may hold open at once, across every connection. A watch is a call:
// it keeps its connection from being idle (grpcIdleTimeout) and holds a
// goroutine and its buffers for as long as its caller likes, so without a
// bound anyone who could reach the port held as many as they opened. A
// load balancer or orchestrator watches from a few places; past the bound
// a watch is refused RESOURCE_EXHAUSTED, and Check, or a watch sent with
// any valid key, is still answered.
const maxKeylessWatches = 256

func newAuthenticator(keys []config.APIKey) (*authenticator, error) {
	a := &authenticator{keys: map[[32]byte]principal{}, keylessWatches: make(chan struct{}, maxKeylessWatches)}
	for _, k := range keys {
		b, err := hex.DecodeString(k.SHA256)
		if err != nil || len(b) != 32 {
			return nil, status.Errorf(codes.InvalidArgument, "api key %s: bad sha256", k.Name)
		}
		a.keys[[32]byte(b)] = principal{name: k.Name, roles: k.Roles}
	}
	return a, nil
}

func (a *authenticator) lookup(key string) (principal, bool) {
	// No key is no caller, whatever hash a configuration holds.
	if key == "" {
		return principal{}, false
	}
	// Only hashes are held and compared: timing reveals nothing about keys.
	p, ok := a.keys[sha256.Sum256([]byte(key))]
	return p, ok
}

// bearerKey returns the key an Authorization value carries: the value
// after "Bearer " (the scheme name is case-insensitive, RFC 9110 §11.1),
// or the value itself.
func bearerKey(v string) string {
	key := strings.TrimSpace(v)
	if scheme, rest, ok := strings.Cut(key, " "); ok && strings.EqualFold(scheme, "Bearer") {
		key = strings.TrimSpace(rest)
	}
	return key
}

// check authenticates key and checks that it may call method.
func (a *authenticator) check(method, key string) (principal, error) {
	if key == "" {
		return principal{}, status.Error(codes.Unauthenticated, "missing API key: send Authorization: Bearer <key>")
	}
	p, ok := a.lookup(key)
	if !ok {
		return principal{}, status.Error(codes.Unauthenticated, "unknown API key")
	}
	return p, permit(p, method)
}

// permit checks that p holds a role that may call method.
func permit(p principal, method string) error {
	allowed := methodRoles[method]
	for _, r := range p.roles {
		if slices.Contains(allowed, r) {
			return nil
		}
	}
	return status.Errorf(codes.PermissionDenied, "key %s (roles %s) may not call %s", p.name, strings.Join(p.roles, ", "), method[strings.LastIndex(method, "/")+1:])
}

// authorize authenticates the caller of method and checks its role. A
// gRPC call was authenticated before its message was read (tap), and a
// REST call before its body was (authenticator.identify, limitBody): only
// their role is checked here.
func (a *authenticator) authorize(ctx context.Context, method string) (context.Context, error) {
	if publicMethods[method] {
		return ctx, nil
	}
	if p, ok := ctx.Value(principalKey{}).(principal); ok {
		if err := permit(p, method); err != nil {
			a.refusals.note(ctx, method, "", p.name, err)
			return nil, err
		}
		return ctx, nil
	}
	var key string
	// One header read, not a copy of every header (FromIncomingContext).
	if v := metadata.ValueFromIncomingContext(ctx, "authorization"); len(v) > 0 {
		key = bearerKey(v[0])
	}
	p, err := a.check(method, key)
	if err != nil {
		a.refusals.note(ctx, method, key, p.name, err)
		return nil, err
	}
	return context.WithValue(ctx, principalKey{}, p), nil
}

// tap authenticates a gRPC call from its headers before its message is
// read (grpc.InTapHandle): a caller without a key that may make the call
// is refused without the server decoding what it sent, which could cost
// many times its size in memory. The refusal is counted, through
// refused, as the interceptors count any other call. A method the server
// does not serve is left to gRPC, which answers Unimplemented without
// reading it. The tap runs on the connection's reader: a hash and a map
// lookup.
func (a *authenticator) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	method := info.FullMethodName
	if _, served := methodRoles[method]; !served || publicMethods[method] {
		return ctx, nil
	}
	var key string
	if v := info.Header.Get("authorization"); len(v) > 0 {
		key = bearerKey(v[0])
	}
	p, err := a.check(method, key)
	if err != nil {
		if a.refused != nil {
			a.refused(ctx, method, err)
		}
		a.refusals.note(ctx, method, key, p.name, err)
		return ctx, err
	}
	return context.WithValue(ctx, principalKey{}, p), nil
}

// identify returns ctx naming the caller whose key an Authorization value
// carries, false when the ledger holds no such key. The REST API reads a
// request's body only for a caller it names; the call's authorization
// then checks its role alone, as after tap.
func (a *authenticator) identify(ctx context.Context, authorization string) (context.Context, bool) {
	p, ok := a.lookup(bearerKey(authorization))
	if !ok {
		return ctx, false
	}
	return context.WithValue(ctx, principalKey{}, p), true
}

func (a *authenticator) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := a.authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (a *authenticator) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := a.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	if info.FullMethod == healthWatch && !a.known(ctx) {
		select {
		case a.keylessWatches <- struct{}{}:
			defer func() { <-a.keylessWatches }()
		default:
			return status.Errorf(codes.ResourceExhausted, "%d health watches without a key are open, the most the ledger keeps: call Check, or watch with an API key", maxKeylessWatches)
		}
	}
	return handler(srv, authorizedStream{ServerStream: ss, ctx: ctx})
}

// known reports whether the caller of a public method sent a key the
// ledger holds (any role).
func (a *authenticator) known(ctx context.Context) bool {
	v := metadata.ValueFromIncomingContext(ctx, "authorization")
	if len(v) == 0 {
		return false
	}
	_, ok := a.lookup(bearerKey(v[0]))
	return ok
}

// authorizedStream is a stream whose context names its caller, as a unary
// call's does.
type authorizedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s authorizedStream) Context() context.Context { return s.ctx }
