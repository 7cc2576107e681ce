package server

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/vouchml/vouch/server/oippb"
	"github.com/vouchml/vouch/tensor"
)

// NewGRPCServer returns a gRPC server serving inference.GRPCInferenceService
// with the access log and the request size limit; opts add to them (TLS
// credentials, for one).
func (s *Server) NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	opts = append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(s.opt.MaxBodyBytes)),
		grpc.MaxSendMsgSize(1 << 30),
		grpc.UnaryInterceptor(s.grpcAccessLog),
	}, opts...)
	g := grpc.NewServer(opts...)
	oippb.RegisterGRPCInferenceServiceServer(g, &grpcService{s: s})
	return g
}

type grpcStateKey struct{}

func (s *Server) grpcAccessLog(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
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
			a = g.s.opt.Credentials.authenticate(first(md, "authorization"), ti.State.PeerCertificates)
		}
	}
	if a.p == nil && a.code == 0 {
		a = g.s.opt.Credentials.authenticate(first(md, "authorization"), nil)
	}
	a = a.authorize(role)
	grpcState(ctx).principal = a.name()
	return a
}

func grpcError(e *apiError) error {
	c := codes.Internal
	switch e.code {
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
	}
	return status.Error(c, e.msg)
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
	return &oippb.ServerMetadataResponse{Name: g.s.opt.Name, Version: g.s.opt.Version, Extensions: Extensions}, nil
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
		r, err := decodeProto(req)
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
func decodeProto(pr *oippb.ModelInferRequest) (*inferRequest, error) {
	req := &inferRequest{ID: pr.Id, Inputs: map[string]*tensor.Tensor{}}
	if len(pr.Inputs) == 0 {
		return nil, fmt.Errorf("request has no inputs")
	}
	raw := pr.RawInputContents
	if len(raw) > 0 && len(raw) != len(pr.Inputs) {
		return nil, fmt.Errorf("raw_input_contents has %d entries for %d inputs", len(raw), len(pr.Inputs))
	}
	for i, in := range pr.Inputs {
		if in.Name == "" {
			return nil, fmt.Errorf("input %d has no name", i)
		}
		if _, dup := req.Inputs[in.Name]; dup {
			return nil, fmt.Errorf("input %q given twice", in.Name)
		}
		dt, shape, n, err := checkTensorHeader(in.Name, in.Datatype, in.Shape)
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
		t.Data = append([]bool(nil), c.BoolContents...)
	case tensor.Int8, tensor.Int16, tensor.Int32:
		got = len(c.IntContents)
		if got != n {
			return nil, wrong("int_contents")
		}
		f := make([]float64, n)
		for i, v := range c.IntContents {
			f[i] = float64(v)
			if (dt == tensor.Int8 && int32(int8(v)) != v) || (dt == tensor.Int16 && int32(int16(v)) != v) {
				return nil, fmt.Errorf("input %q: element %d: %d is out of range for %s", name, i, v, oipType(dt))
			}
		}
		return tensor.FromFloat64s(dt, shape, f), nil
	case tensor.Int64:
		got = len(c.Int64Contents)
		if got != n {
			return nil, wrong("int64_contents")
		}
		t.Data = append([]int64(nil), c.Int64Contents...)
	case tensor.Uint8, tensor.Uint16, tensor.Uint32:
		got = len(c.UintContents)
		if got != n {
			return nil, wrong("uint_contents")
		}
		f := make([]float64, n)
		for i, v := range c.UintContents {
			f[i] = float64(v)
			if (dt == tensor.Uint8 && v > 0xff) || (dt == tensor.Uint16 && v > 0xffff) {
				return nil, fmt.Errorf("input %q: element %d: %d is out of range for %s", name, i, v, oipType(dt))
			}
		}
		return tensor.FromFloat64s(dt, shape, f), nil
	case tensor.Uint64:
		got = len(c.Uint64Contents)
		if got != n {
			return nil, wrong("uint64_contents")
		}
		t.Data = append([]uint64(nil), c.Uint64Contents...)
	case tensor.Float32:
		got = len(c.Fp32Contents)
		if got != n {
			return nil, wrong("fp32_contents")
		}
		t.Data = append([]float32(nil), c.Fp32Contents...)
	case tensor.Float64:
		got = len(c.Fp64Contents)
		if got != n {
			return nil, wrong("fp64_contents")
		}
		t.Data = append([]float64(nil), c.Fp64Contents...)
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
