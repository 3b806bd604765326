package serve

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	pb "github.com/zoo-dev/zoo/serve/inferencepb"
)

// RegisterGRPC registers the Open Inference Protocol's GRPCInferenceService
// (inference.GRPCInferenceService of grpc_predict_v2.proto) for s on r, a program's own gRPC
// server, with the REST side's decoding, batching and errors (as gRPC status codes:
// InvalidArgument, NotFound, ResourceExhausted, Unavailable, Internal). gRPC takes messages
// of 4 MiB by default: set grpc.MaxRecvMsgSize on that server for larger requests. It panics,
// as grpc.Server.RegisterService does, when r already has the service.
func (s *Server) RegisterGRPC(r grpc.ServiceRegistrar) {
	pb.RegisterGRPCInferenceServiceServer(r, &grpcService{s: s})
}

// GRPC returns a new gRPC server with s's GRPCInferenceService (RegisterGRPC), taking
// messages up to Config.MaxBody and at most Config.MaxStreams concurrent streams per
// connection; the caller serves it on a listener. t bounds its connections and streams (a
// zero field takes its default, as Serve's): a connection must finish its HTTP/2 handshake
// within t.Header (gRPC's own default is 120s, long enough for a client dribbling bytes to
// hold a goroutine for two minutes); a stream's request must arrive within t.Read, else the
// stream is cancelled (gRPC's default waits for ever, so a client that sends headers and
// stalls holds a goroutine for good); a call is answered within t.Write of its arrival
// (DeadlineExceeded after); a connection idle for t.Idle is closed.
func (s *Server) GRPC(t Timeouts) *grpc.Server {
	t = t.withDefaults()
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(int(min(s.cfg.MaxBody, 1<<31-1))), grpc.MaxConcurrentStreams(uint32(s.cfg.MaxStreams)),
		grpc.ConnectionTimeout(t.Header), grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: t.Idle}),
		grpc.InTapHandle(func(ctx context.Context, _ *tap.Info) (context.Context, error) {
			ctx, cancel := context.WithCancelCause(ctx)
			g := &stallGuard{timer: time.AfterFunc(t.Read, func() { cancel(errStalled) })}
			s.arriving.Add(1)
			g.arrived = func() { g.once.Do(func() { s.arriving.Add(-1) }) }
			context.AfterFunc(ctx, func() { g.timer.Stop(); g.arrived() })
			return context.WithValue(ctx, stallKey{}, g), nil
		}),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if g, ok := ctx.Value(stallKey{}).(*stallGuard); ok {
				g.arrived()
				if !g.timer.Stop() {
					return nil, status.Error(codes.DeadlineExceeded, errStalled.Error())
				}
			}
			ctx, cancel := context.WithTimeout(ctx, t.Write)
			defer cancel()
			return h(ctx, req)
		}),
	}
	g := grpc.NewServer(opts...)
	s.RegisterGRPC(g)
	return g
}

// errStalled cancels a gRPC stream whose request did not arrive within the read timeout.
var errStalled = errors.New("the request did not arrive within the server's read timeout")

// stallKey keys a stream's *stallGuard in its context.
type stallKey struct{}

// stallGuard cancels a stream when its timer fires before the stream's request arrived, and
// takes the stream off Server.arriving once (when its request arrives or it ends).
type stallGuard struct {
	timer   *time.Timer
	once    sync.Once
	arrived func()
}

// grpcService answers the protocol's RPCs with the same decoding, batching and errors as
// the REST side.
type grpcService struct {
	pb.UnimplementedGRPCInferenceServiceServer
	s *Server
}

func (g *grpcService) ServerLive(context.Context, *pb.ServerLiveRequest) (*pb.ServerLiveResponse, error) {
	return &pb.ServerLiveResponse{Live: true}, nil
}

func (g *grpcService) ServerReady(context.Context, *pb.ServerReadyRequest) (*pb.ServerReadyResponse, error) {
	return &pb.ServerReadyResponse{Ready: g.s.ready.Load()}, nil
}

// auth returns Unauthenticated when the server has an API key and the call's authorization
// metadata does not carry it as a Bearer token.
func (g *grpcService) auth(ctx context.Context) error {
	if g.s.cfg.APIKey == "" {
		return nil
	}
	md, _ := grpcmd.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if bearerOK(v, g.s.cfg.APIKey) {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, errUnauthorized.Error())
}

func (g *grpcService) ModelReady(_ context.Context, r *pb.ModelReadyRequest) (*pb.ModelReadyResponse, error) {
	if _, err := g.s.model(r.GetName()); err != nil {
		return nil, grpcError(err)
	}
	return &pb.ModelReadyResponse{Ready: g.s.ready.Load()}, nil
}

func (g *grpcService) ServerMetadata(ctx context.Context, _ *pb.ServerMetadataRequest) (*pb.ServerMetadataResponse, error) {
	if err := g.auth(ctx); err != nil {
		return nil, err
	}
	return &pb.ServerMetadataResponse{Name: "zoo", Version: g.s.cfg.Version, Extensions: []string{}}, nil
}

func (g *grpcService) ModelMetadata(ctx context.Context, r *pb.ModelMetadataRequest) (*pb.ModelMetadataResponse, error) {
	if err := g.auth(ctx); err != nil {
		return nil, err
	}
	m, err := g.s.model(r.GetName())
	if err != nil {
		return nil, grpcError(err)
	}
	md := metadata(m)
	resp := &pb.ModelMetadataResponse{Name: m.Name, Versions: []string{"1"}, Platform: "zoo"}
	for _, in := range md["inputs"].([]ioMeta) {
		resp.Inputs = append(resp.Inputs, &pb.ModelMetadataResponse_TensorMetadata{Name: in.Name, Datatype: in.Datatype, Shape: in.Shape})
	}
	for _, o := range md["outputs"].([]ioMeta) {
		resp.Outputs = append(resp.Outputs, &pb.ModelMetadataResponse_TensorMetadata{Name: o.Name, Datatype: o.Datatype, Shape: o.Shape})
	}
	return resp, nil
}

func (g *grpcService) ModelInfer(ctx context.Context, r *pb.ModelInferRequest) (*pb.ModelInferResponse, error) {
	if err := g.auth(ctx); err != nil {
		return nil, err
	}
	g.s.running.Add(1)
	defer g.s.running.Add(-1)
	t0 := time.Now()
	resp, err := g.infer(ctx, r)
	code := 200
	if err != nil {
		code = httpCode(err)
	}
	d := time.Since(t0)
	g.s.obs.request("grpc_infer", code, d)
	if code >= 500 && code != 503 {
		g.s.log.Error("request failed", "rpc", "ModelInfer", "model", r.GetModelName(), "status", code, "error", err.Error())
	}
	if g.s.access != nil {
		g.s.access.Info("request", "rpc", "ModelInfer", "model", r.GetModelName(), "status", code, "ms", float64(d.Microseconds())/1000)
	}
	if err != nil {
		return nil, grpcError(err)
	}
	return resp, nil
}

func (g *grpcService) infer(ctx context.Context, r *pb.ModelInferRequest) (*pb.ModelInferResponse, error) {
	m, err := g.s.model(r.GetModelName())
	if err != nil {
		return nil, err
	}
	if !g.s.ready.Load() {
		return nil, notReady
	}
	w, err := wireOf(r)
	if err != nil {
		return nil, err
	}
	req, err := decodeWire(w, m, g.s.cfg.Truncate)
	if err != nil {
		return nil, err
	}
	outs, release, err := g.s.run(ctx, m, req)
	if err != nil {
		return nil, err
	}
	defer release()
	resp := &pb.ModelInferResponse{ModelName: m.Name, ModelVersion: "1", Id: r.GetId()}
	for _, o := range outs {
		shape := make([]int64, len(o.Shape))
		for i, d := range o.Shape {
			shape[i] = int64(d)
		}
		resp.Outputs = append(resp.Outputs, &pb.ModelInferResponse_InferOutputTensor{Name: o.Name, Datatype: o.Datatype, Shape: shape,
			Contents: &pb.InferTensorContents{Fp32Contents: o.Data}})
	}
	return resp, nil
}

// wireOf turns a gRPC request into the REST side's form: each input's contents (or its raw
// little-endian bytes) become its data list, and the parameters their JSON values.
func wireOf(r *pb.ModelInferRequest) (*wireRequest, error) {
	w := &wireRequest{ID: r.GetId(), Parameters: map[string]any{}}
	for k, p := range r.GetParameters() {
		switch v := p.GetParameterChoice().(type) {
		case *pb.InferParameter_BoolParam:
			w.Parameters[k] = v.BoolParam
		case *pb.InferParameter_StringParam:
			w.Parameters[k] = v.StringParam
		case *pb.InferParameter_Int64Param:
			w.Parameters[k] = v.Int64Param
		}
	}
	raw := r.GetRawInputContents()
	if len(raw) > 0 && len(raw) != len(r.GetInputs()) {
		return nil, badRequest("raw_input_contents: %d tensors for %d inputs", len(raw), len(r.GetInputs()))
	}
	for i, in := range r.GetInputs() {
		var data any
		var err error
		if len(raw) > 0 {
			if in.GetContents() != nil {
				return nil, badRequest("input %q: contents and raw_input_contents both given", in.GetName())
			}
			data, err = rawData(in.GetName(), in.GetDatatype(), raw[i])
		} else {
			data, err = contentsData(in.GetName(), in.GetDatatype(), in.GetContents())
		}
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(data)
		if err != nil {
			return nil, badRequest("input %q: %v", in.GetName(), err)
		}
		w.Inputs = append(w.Inputs, wireTensor{Name: in.GetName(), Datatype: in.GetDatatype(), Shape: in.GetShape(), Data: b})
	}
	for _, o := range r.GetOutputs() {
		w.Outputs = append(w.Outputs, struct {
			Name string `json:"name"`
		}{o.GetName()})
	}
	return w, nil
}

// contentsData returns the contents field of datatype (nil for a datatype the decoder
// refuses by name).
func contentsData(name, datatype string, c *pb.InferTensorContents) (any, error) {
	if c == nil {
		return nil, badRequest("input %q: no contents", name)
	}
	switch datatype {
	case "INT64":
		return c.GetInt64Contents(), nil
	case "BOOL":
		return c.GetBoolContents(), nil
	case "BYTES":
		s := make([]string, len(c.GetBytesContents()))
		for i, b := range c.GetBytesContents() {
			s[i] = string(b)
		}
		return s, nil
	}
	return []any{}, nil
}

// rawData decodes one raw tensor: INT64 as 8 little-endian bytes each, BOOL as one byte,
// BYTES as a 4-byte little-endian length and the bytes.
func rawData(name, datatype string, b []byte) (any, error) {
	switch datatype {
	case "INT64":
		if len(b)%8 != 0 {
			return nil, badRequest("input %q: %d raw bytes is not a whole number of INT64s", name, len(b))
		}
		v := make([]int64, len(b)/8)
		for i := range v {
			v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
		return v, nil
	case "BOOL":
		v := make([]bool, len(b))
		for i, x := range b {
			v[i] = x != 0
		}
		return v, nil
	case "BYTES":
		var v []string
		for len(b) > 0 {
			if len(b) < 4 || uint64(binary.LittleEndian.Uint32(b)) > uint64(len(b)-4) {
				return nil, badRequest("input %q: raw BYTES element %d runs past the data", name, len(v))
			}
			n := binary.LittleEndian.Uint32(b)
			v = append(v, string(b[4:4+n]))
			b = b[4+n:]
		}
		return v, nil
	}
	return []any{}, nil
}

// httpCode is the HTTP status the REST side answers err with; 499 (nginx's "client closed
// request") is a client that left before its answer, which only metrics and logs see.
func httpCode(err error) int {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.code
	case errors.Is(err, context.Canceled):
		return 499
	case errors.Is(err, errQueueFull), errors.Is(err, context.DeadlineExceeded):
		return 503
	}
	return 500
}

// grpcError maps an error to the gRPC status the protocol's HTTP status corresponds to.
func grpcError(err error) error {
	c := codes.Internal
	switch httpCode(err) {
	case 400:
		c = codes.InvalidArgument
	case 401:
		c = codes.Unauthenticated
	case 404:
		c = codes.NotFound
	case 413:
		c = codes.ResourceExhausted
	case 499:
		c = codes.Canceled
	case 503:
		c = codes.Unavailable
	}
	if errors.Is(err, errQueueFull) {
		c = codes.ResourceExhausted
	}
	return status.Error(c, fmt.Sprint(err))
}
