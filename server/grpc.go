package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/vouchml/vouch/server/oippb"
	"github.com/vouchml/vouch/tensor"
)

// NewGRPCServer returns a gRPC server serving inference.GRPCInferenceService
// with the access log, the request size limit and the connection bounds of
// Options.HTTP (handshake within the header timeout, idle connections
// closed, at most 128 concurrent calls a connection); opts add to them (TLS
// credentials, for one). Serve it on Listener(l) for the connection limits.
func (s *Server) NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	lim := s.opt.HTTP.withDefaults()
	opts = append([]grpc.ServerOption{
		grpc.ConnectionTimeout(lim.ReadHeaderTimeout),
		grpc.MaxConcurrentStreams(128),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: lim.IdleTimeout}),
		grpc.MaxRecvMsgSize(int(min(s.opt.MaxGRPCBytes, math.MaxInt32))),
		grpc.MaxSendMsgSize(1 << 30),
		grpc.UnaryInterceptor(s.grpcAccessLog),
		grpc.StatsHandler(grpcRefusals{s}),
	}, opts...)
	g := grpc.NewServer(opts...)
	oippb.RegisterGRPCInferenceServiceServer(g, &grpcService{s: s})
	s.registerGRPCExtras(g)
	return g
}

type grpcStateKey struct{}

func (s *Server) grpcAccessLog(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	grpcReached(ctx)
	md, _ := metadata.FromIncomingContext(ctx)
	st := &reqState{trace: newTrace(first(md, "traceparent"))}
	grpc.SetHeader(ctx, metadata.Pairs("traceparent", st.trace.Traceparent(), "vouch-trace-id", st.trace.TraceID))
	resp, err := handler(context.WithValue(ctx, grpcStateKey{}, st), req)
	remote := ""
	if p, ok := peer.FromContext(ctx); ok {
		remote = p.Addr.String()
	}
	code := status.Code(err)
	lvl := levelFor(200)
	if code != codes.OK {
		lvl = levelFor(400)
	}
	s.log.LogAttrs(ctx, lvl, "grpc", slogString("method", info.FullMethod), slogString("code", code.String()),
		slogFloat("duration_ms", float64(time.Since(start).Microseconds())/1000),
		slogString("trace_id", st.trace.TraceID), slogString("principal", st.principal),
		slogString("model", st.model), slogString("remote", remote))
	s.span(ctx, st, info.FullMethod, "grpc", start, code.String(), code == codes.Internal || code == codes.Unavailable || code == codes.Unknown, remote)
	return resp, err
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

type grpcService struct {
	oippb.UnimplementedGRPCInferenceServiceServer
	s *Server
}

func grpcState(ctx context.Context) *reqState {
	if st, ok := ctx.Value(grpcStateKey{}).(*reqState); ok {
		return st
	}
	return &reqState{trace: newTrace("")}
}

// auth authenticates a call from its authorization metadata or the
// verified client certificate.
func (g *grpcService) auth(ctx context.Context, role string) authResult {
	md, _ := metadata.FromIncomingContext(ctx)
	var a authResult
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			a = g.s.credentialsFor(first(md, "authorization"), ti.State.PeerCertificates)
		}
	}
	if a.p == nil && a.code == 0 {
		a = g.s.credentialsFor(first(md, "authorization"), nil)
	}
	a = a.authorize(role)
	grpcState(ctx).principal = a.name()
	return a
}

func grpcError(e *apiError) error {
	return status.Error(grpcCode(e.code), bound(e.msg, maxErrorBytes))
}

// grpcCode maps the server's HTTP-style codes onto gRPC's.
func grpcCode(code int) codes.Code {
	c := codes.Internal
	switch code {
	case 400:
		c = codes.InvalidArgument
	case 401:
		c = codes.Unauthenticated
	case 403:
		c = codes.PermissionDenied
	case 404:
		c = codes.NotFound
	case 413:
		c = codes.ResourceExhausted
	case 499:
		c = codes.Canceled
	case 503:
		c = codes.Unavailable
	case 504:
		c = codes.DeadlineExceeded
	}
	return c
}

func (g *grpcService) ServerLive(ctx context.Context, _ *oippb.ServerLiveRequest) (*oippb.ServerLiveResponse, error) {
	return &oippb.ServerLiveResponse{Live: true}, nil
}

func (g *grpcService) ServerReady(ctx context.Context, _ *oippb.ServerReadyRequest) (*oippb.ServerReadyResponse, error) {
	return &oippb.ServerReadyResponse{Ready: g.s.Ready()}, nil
}

func (g *grpcService) ModelReady(ctx context.Context, req *oippb.ModelReadyRequest) (*oippb.ModelReadyResponse, error) {
	if a := g.auth(ctx, RoleInfer); a.code != 0 {
		return nil, grpcError(errf(a.code, "%s", a.msg))
	}
	e, aerr := g.s.lookup(req.Name, req.Version)
	if aerr != nil {
		return nil, grpcError(aerr)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return &oippb.ModelReadyResponse{Ready: e.ready}, nil
}

func (g *grpcService) ServerMetadata(ctx context.Context, _ *oippb.ServerMetadataRequest) (*oippb.ServerMetadataResponse, error) {
	if a := g.auth(ctx, RoleInfer); a.code != 0 {
		return nil, grpcError(errf(a.code, "%s", a.msg))
	}
	// The model repository extension is served over HTTP only: gRPC does
	// not advertise what it does not implement.
	ext := slices.DeleteFunc(slices.Clone(Extensions), func(e string) bool { return e == "model_repository" })
	return &oippb.ServerMetadataResponse{Name: g.s.opt.Name, Version: g.s.opt.Version, Extensions: ext}, nil
}

func (g *grpcService) ModelMetadata(ctx context.Context, req *oippb.ModelMetadataRequest) (*oippb.ModelMetadataResponse, error) {
	if a := g.auth(ctx, RoleInfer); a.code != 0 {
		return nil, grpcError(errf(a.code, "%s", a.msg))
	}
	e, aerr := g.s.lookup(req.Name, req.Version)
	if aerr != nil {
		return nil, grpcError(aerr)
	}
	meta := func(specs []TensorSpec) []*oippb.ModelMetadataResponse_TensorMetadata {
		var out []*oippb.ModelMetadataResponse_TensorMetadata
		for _, t := range specs {
			out = append(out, &oippb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: oipType(t.DType), Shape: t.Shape})
		}
		return out
	}
	return &oippb.ModelMetadataResponse{
		Name: e.info.Name, Versions: g.s.versions(e.info.Name), Platform: e.info.Platform,
		Inputs: meta(e.info.Inputs), Outputs: meta(e.info.Outputs),
	}, nil
}

func (g *grpcService) ModelInfer(ctx context.Context, req *oippb.ModelInferRequest) (*oippb.ModelInferResponse, error) {
	st := grpcState(ctx)
	st.model = req.ModelName
	source := ""
	if p, ok := peer.FromContext(ctx); ok {
		source = p.Addr.String()
	}
	c := &call{
		protocol: "grpc", trace: st.trace, auth: g.auth(ctx, RoleInfer), source: source,
		model: req.ModelName, version: req.ModelVersion, requestID: req.Id, start: time.Now(),
	}
	out, aerr := g.s.infer(ctx, c, func() (*inferRequest, *apiError) {
		r, err := decodeProto(req, g.s.opt.Limits)
		if errors.Is(err, errTooLarge) {
			return nil, errf(413, "%v", err)
		}
		if err != nil {
			return nil, errf(400, "%v", err)
		}
		return r, nil
	})
	if out.audited {
		grpc.SetHeader(ctx, metadata.Pairs("vouch-log-index", strconv.FormatUint(out.index, 10), "vouch-leaf-hash", hex.EncodeToString(out.leaf[:])))
	}
	if aerr != nil {
		return nil, grpcError(aerr)
	}
	info := out.entry.info
	resp := &oippb.ModelInferResponse{
		ModelName: info.Name, ModelVersion: info.Version, Id: req.Id,
		Parameters: map[string]*oippb.InferParameter{"trace_id": strParam(st.trace.TraceID)},
	}
	if out.audited {
		resp.Parameters["log_index"] = &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_Uint64Param{Uint64Param: out.index}}
		resp.Parameters["leaf_hash"] = strParam(hex.EncodeToString(out.leaf[:]))
	}
	if out.label != "" {
		resp.Parameters["output_label"] = strParam(out.label)
		resp.Parameters["confidence"] = &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_DoubleParam{DoubleParam: *out.confidence}}
	}
	// Every row's decision and, when asked, the reasons: the HTTP
	// response's "decisions" and "explanation" parameters, as JSON text
	// (an InferParameter holds scalars only).
	dp := map[string]any{}
	decisionParams(dp, out)
	for _, k := range []string{"decisions", "explanation"} {
		if v, ok := dp[k]; ok {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, grpcError(errf(500, "encoding %s: %v", k, err))
			}
			resp.Parameters[k] = strParam(string(b))
		}
	}
	for _, o := range selectOutputs(info, out.req) {
		t := out.outs[o.Name]
		shape := make([]int64, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = int64(d)
		}
		resp.Outputs = append(resp.Outputs, &oippb.ModelInferResponse_InferOutputTensor{Name: o.Name, Datatype: oipType(t.DType), Shape: shape})
		resp.RawOutputContents = append(resp.RawOutputContents, rawBytes(t))
	}
	return resp, nil
}

func strParam(s string) *oippb.InferParameter {
	return &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_StringParam{StringParam: s}}
}

// decodeProto decodes a gRPC inference request: tensor data from
// raw_input_contents (all inputs) or from each input's typed contents.
//
// The typed contents are taken as the tensor's data without a copy where
// the types agree (the message is this call's own), and converted straight
// into the tensor's type otherwise; lim's budget is checked from each
// shape before anything is converted.
func decodeProto(pr *oippb.ModelInferRequest, lim Limits) (*inferRequest, error) {
	lim = lim.withDefaults()
	req := &inferRequest{ID: pr.Id, Inputs: map[string]*tensor.Tensor{}}
	if len(pr.Inputs) == 0 {
		return nil, fmt.Errorf("request has no inputs")
	}
	if len(pr.Inputs) > lim.Inputs {
		return nil, fmt.Errorf("request has %d inputs, more than the %d allowed", len(pr.Inputs), lim.Inputs)
	}
	if p, ok := pr.Parameters["explain"]; ok {
		v, isBool := p.GetParameterChoice().(*oippb.InferParameter_BoolParam)
		if !isBool {
			return nil, fmt.Errorf("parameter explain must be a bool")
		}
		req.Explain = v.BoolParam
	}
	bud := &budget{lim: lim}
	raw := pr.RawInputContents
	if len(raw) > 0 && len(raw) != len(pr.Inputs) {
		return nil, fmt.Errorf("raw_input_contents has %d entries for %d inputs", len(raw), len(pr.Inputs))
	}
	for i, in := range pr.Inputs {
		dt, shape, n, err := bud.input(req, i, in.Name, in.Datatype, in.Shape)
		if err != nil {
			return nil, err
		}
		var t *tensor.Tensor
		if len(raw) > 0 {
			if in.Contents != nil {
				return nil, fmt.Errorf("input %q has contents while raw_input_contents is used", in.Name)
			}
			t, err = decodeRaw(in.Name, dt, shape, n, raw[i])
		} else {
			t, err = decodeContents(in.Name, dt, shape, n, in.Contents)
		}
		if err != nil {
			return nil, err
		}
		req.Inputs[in.Name] = t
	}
	for _, o := range pr.Outputs {
		if o.Name == "" {
			return nil, fmt.Errorf("requested output has no name")
		}
		req.Outputs = append(req.Outputs, outputRequest{Name: o.Name, Binary: true})
	}
	return req, nil
}

// decodeContents converts typed InferTensorContents to a tensor.
func decodeContents(name string, dt tensor.DType, shape []int, n int, c *oippb.InferTensorContents) (*tensor.Tensor, error) {
	if c == nil {
		return nil, fmt.Errorf("input %q has no data", name)
	}
	t := &tensor.Tensor{DType: dt, Shape: shape}
	var got int
	wrong := func(field string) error {
		return fmt.Errorf("input %q: shape %v needs %d elements in %s, got %d", name, shape, n, field, got)
	}
	switch dt {
	case tensor.Bool:
		got = len(c.BoolContents)
		if got != n {
			return nil, wrong("bool_contents")
		}
		t.Data = c.BoolContents
	case tensor.Int8, tensor.Int16, tensor.Int32:
		got = len(c.IntContents)
		if got != n {
			return nil, wrong("int_contents")
		}
		var err error
		if t.Data, err = narrowed(name, dt, c.IntContents); err != nil {
			return nil, err
		}
	case tensor.Int64:
		got = len(c.Int64Contents)
		if got != n {
			return nil, wrong("int64_contents")
		}
		t.Data = c.Int64Contents
	case tensor.Uint8, tensor.Uint16, tensor.Uint32:
		got = len(c.UintContents)
		if got != n {
			return nil, wrong("uint_contents")
		}
		var err error
		if t.Data, err = narrowed(name, dt, c.UintContents); err != nil {
			return nil, err
		}
	case tensor.Uint64:
		got = len(c.Uint64Contents)
		if got != n {
			return nil, wrong("uint64_contents")
		}
		t.Data = c.Uint64Contents
	case tensor.Float32:
		got = len(c.Fp32Contents)
		if got != n {
			return nil, wrong("fp32_contents")
		}
		t.Data = c.Fp32Contents
	case tensor.Float64:
		got = len(c.Fp64Contents)
		if got != n {
			return nil, wrong("fp64_contents")
		}
		t.Data = c.Fp64Contents
	case tensor.String:
		got = len(c.BytesContents)
		if got != n {
			return nil, wrong("bytes_contents")
		}
		s := make([]string, n)
		for i, b := range c.BytesContents {
			s[i] = string(b)
		}
		t.Data = s
	default:
		return nil, fmt.Errorf("input %q: %s data must come in raw_input_contents", name, oipType(dt))
	}
	return t, nil
}

// narrowed returns 32-bit protobuf integers as the elements of dt: as they
// are for a 32-bit type, else narrowed.
func narrowed[S int32 | uint32](name string, dt tensor.DType, in []S) (any, error) {
	switch dt {
	case tensor.Int8:
		return narrow[int8](name, dt, in)
	case tensor.Int16:
		return narrow[int16](name, dt, in)
	case tensor.Uint8:
		return narrow[uint8](name, dt, in)
	case tensor.Uint16:
		return narrow[uint16](name, dt, in)
	}
	return in, nil
}

// narrow converts 32-bit protobuf integers to a narrower element type,
// refusing a value that does not fit.
func narrow[T int8 | int16 | uint8 | uint16, S int32 | uint32](name string, dt tensor.DType, in []S) ([]T, error) {
	out := make([]T, len(in))
	for i, v := range in {
		out[i] = T(v)
		if S(out[i]) != v {
			return nil, fmt.Errorf("input %q: element %d: %d is out of range for %s", name, i, v, oipType(dt))
		}
	}
	return out, nil
}
