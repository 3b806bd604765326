package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/internal/memlimit"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/plugin/pluginpb"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// LogLevelEnv is the environment variable through which the host tells a plugin how much to
// log on stderr (trace, debug, info, warn, error); the host sets it to debug under --verbose.
const LogLevelEnv = env.PluginLogLevel

// PluginIDEnv marks each plugin process the host starts, and what it starts in turn, with an
// id of its own, so that the host can find and kill all of them (contain_linux.go).
const PluginIDEnv = env.PluginID

// server adapts a variant.Variant to the gRPC service.
type server struct {
	pluginpb.UnimplementedVariantServer
	v      variant.Variant
	logger hclog.Logger
}

// NewServer returns the gRPC service for v. Serve and the in-process mode use it; a plugin
// that needs its own go-plugin set-up may register it itself.
func NewServer(v variant.Variant) pluginpb.VariantServer {
	return &server{v: v, logger: hclog.NewNullLogger()}
}

// Describe answers with the variant's description.
func (s *server) Describe(context.Context, *pluginpb.DescribeRequest) (resp *pluginpb.DescribeResponse, err error) {
	defer recoverAsStatus(&err, "Describe")
	resp, err = DescriptionToProto(s.v.Describe())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "describe: %v", err)
	}
	return resp, nil
}

// Build builds, exports and streams the model.
func (s *server) Build(req *pluginpb.BuildRequest, stream pluginpb.Variant_BuildServer) (err error) {
	defer recoverAsStatus(&err, "Build")
	start := time.Now()
	d := s.v.Describe()
	layer, training := variant.SplitTraining(ConfigFromProto(req.GetConfig()))
	cfg, err := variant.Resolve(d, layer)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if training {
		cfg = variant.WithTraining(cfg)
	}
	mem, err := memlimit.Available()
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	ctx := stream.Context()
	if !mem.Off() {
		ctx = memlimit.WithBudget(ctx, mem.Available/WeightCopies)
	}
	g, err := s.v.Build(ctx, cfg, req.GetSeed())
	if err != nil {
		return status.Error(codes.InvalidArgument, buildError(d, cfg, mem, err))
	}
	built := time.Now()
	data, err := onnx.Export(g, onnx.ExportOptions{Opset: int(req.GetOpset()), ProducerVersion: d.Name + " " + d.Version})
	if err != nil {
		return status.Errorf(codes.Internal, "%s built a graph that cannot be exported: %v", d.Name, err)
	}
	s.logger.Debug("built", "variant", d.Name, "config", cfg.JSON(), "seed", req.GetSeed(),
		"bytes", len(data), "build", built.Sub(start).String(), "export", time.Since(built).String())
	if err := SendModel(stream, data, int(req.GetMaxChunkBytes())); err != nil {
		return err
	}
	s.logger.Debug("streamed", "variant", d.Name, "bytes", len(data), "total", time.Since(start).String())
	return nil
}

// WeightCopies is how many times over a model's weights are in memory at the peak of a
// build: the graph and its ONNX serialization in the plugin, the received bytes and the
// imported graph in zoo (measured: each process peaks at about twice the weights). A build's
// weight budget is the memory available divided by it.
const WeightCopies = 4

// buildError is the message of a failed Build. A build over its weight budget says how much
// it needs, how much there is, and which hyperparameters to lower: those set above their
// defaults, else every integer one.
func buildError(d variant.Description, cfg variant.Config, mem memlimit.Info, err error) string {
	var ob *memlimit.OverBudget
	if !errors.As(err, &ob) {
		return err.Error()
	}
	var raised, ints []string
	for _, p := range d.Params {
		if p.Kind != variant.KindInt {
			continue
		}
		ints = append(ints, p.Name)
		if def, ok := p.Default.(int64); ok && int64(cfg.Int(p.Name)) > def {
			raised = append(raised, p.Name)
		}
	}
	if len(raised) == 0 {
		raised = ints
	}
	about := ""
	if ob.Estimated {
		about = "about "
	}
	list := strings.Join(raised, ", ")
	if i := strings.LastIndex(list, ", "); i >= 0 {
		list = list[:i] + " or " + list[i+2:]
	}
	peak := int64(math.MaxInt64)
	if ob.Needed <= math.MaxInt64/WeightCopies {
		peak = ob.Needed * WeightCopies
	}
	return fmt.Sprintf("%s is too big for this machine: its weights need %s%s, %s at the peak (held %d times over while built, sent and imported), "+
		"but only %s of memory is available (%s): lower %s with --set", d.Name, about, memlimit.Bytes(ob.Needed), memlimit.Bytes(peak),
		WeightCopies, memlimit.Bytes(mem.Available), mem.Source, list)
}

// SendModel streams model bytes as a Build answer: header, chunks of at most maxChunk bytes
// (MaxChunkBytes when 0 or larger), trailer with the CRC-32C of all bytes. The chunks are
// slices of data, not copies, so data must not change until the Build call returns; the
// checksum is updated chunk by chunk just before each send, while the chunk is in cache.
// Plugins that implement pluginpb.VariantServer themselves can use it.
func SendModel(stream pluginpb.Variant_BuildServer, data []byte, maxChunk int) error {
	n := chunkLimit(uint32(maxChunk))
	if err := stream.Send(&pluginpb.BuildChunk{Part: &pluginpb.BuildChunk_Header{Header: &pluginpb.BuildHeader{TotalBytes: int64(len(data)), Format: "onnx"}}}); err != nil {
		return fmt.Errorf("send header: %w", err)
	}
	var sum uint32
	for off := 0; off < len(data); off += n {
		chunk := data[off:min(off+n, len(data))]
		sum = crc32.Update(sum, crcTable, chunk)
		// A fresh message per chunk: gRPC forbids changing a message after SendMsg.
		if err := stream.Send(&pluginpb.BuildChunk{Part: &pluginpb.BuildChunk_Data{Data: chunk}}); err != nil {
			return fmt.Errorf("send chunk at %d: %w", off, err)
		}
	}
	if err := stream.Send(&pluginpb.BuildChunk{Part: &pluginpb.BuildChunk_Trailer{Trailer: &pluginpb.BuildTrailer{Crc32C: sum}}}); err != nil {
		return fmt.Errorf("send trailer: %w", err)
	}
	return nil
}

// recoverAsStatus turns a panic of the variant into an Internal error, so a bug in one Build
// does not take the process down, and logs the stack on stderr.
func recoverAsStatus(err *error, what string) {
	if r := recover(); r != nil {
		fmt.Fprintf(os.Stderr, "panic in %s: %v\n%s", what, r, debug.Stack())
		*err = status.Errorf(codes.Internal, "%s panicked: %v", what, r)
	}
}

// pluginLogger is the SDK's logger: hclog JSON on the plugin's real stderr, which the host
// re-emits under --verbose and keeps for error reports.
func pluginLogger(name string, out io.Writer) hclog.Logger {
	lv, _ := env.Get(LogLevelEnv)
	level := hclog.LevelFromString(lv)
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: level, Output: out, JSONFormat: true})
}

// ServeConfig returns the go-plugin configuration that Serve uses for v: zoo's handshake,
// protocol version ProtocolVersion, gRPC only, the message cap raised to MaxMessageBytes,
// logs as JSON on stderr.
func ServeConfig(v variant.Variant) *goplugin.ServeConfig {
	return serveConfig(v, pluginLogger(v.Describe().Name, os.Stderr))
}

// serveConfig is the one go-plugin server configuration, shared by plugin processes
// (ServeConfig) and the in-process mode (which adds go-plugin's test settings).
func serveConfig(v variant.Variant, logger hclog.Logger) *goplugin.ServeConfig {
	return &goplugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: pluginSets(&GRPCPlugin{Service: &server{v: v, logger: logger}}, ProtocolVersion),
		GRPCServer:       newGRPCServer,
		Logger:           logger,
	}
}

// Serve serves v as a zoo variant plugin and does not return. Call it from main, and write
// nothing to stdout before it (stdout carries go-plugin's handshake; log to stderr instead,
// e.g. with the log package). Run by hand, the binary answers `describe` with its
// description as JSON; with no arguments it explains how to use it and exits 1.
func Serve(v variant.Variant) {
	if os.Getenv(Handshake.MagicCookieKey) != Handshake.MagicCookieValue {
		os.Exit(standalone(v, os.Args[1:], os.Stdout, os.Stderr))
	}
	go exitWithParent()
	goplugin.Serve(ServeConfig(v))
	os.Exit(0)
}

// standalone handles a plugin binary that a person, not a zoo host, started.
func standalone(v variant.Variant, args []string, stdout, stderr io.Writer) int {
	d := v.Describe()
	if len(args) == 1 && args[0] == "describe" {
		resp, err := DescriptionToProto(d)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", d.Name, err)
			return 1
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(describeJSON(resp)); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", d.Name, err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(stderr, "%s %s is a zoo variant plugin: zoo starts it, it is not run by hand.\n"+
		"Add it to a registry.yaml (plugin: PATH) and run `zoo run %s --registry registry.yaml`,\n"+
		"check it with `zoo plugin test PATH`, or print its description with `%s describe`.\n",
		d.Name, d.Version, d.Name, os.Args[0])
	return 1
}

// describeJSON is the `describe` subcommand's output.
func describeJSON(r *pluginpb.DescribeResponse) map[string]any {
	var params []map[string]any
	for _, p := range r.GetParams() {
		m := map[string]any{"name": p.GetName(), "kind": kindName(p.GetKind()), "default": ValueFromProto(p.GetDefault()), "doc": p.GetDoc()}
		if len(p.GetChoices()) > 0 {
			m["choices"] = p.GetChoices()
		}
		if p.GetHasMin() {
			m["min"] = p.GetMin()
		}
		params = append(params, m)
	}
	return map[string]any{
		"name": r.GetName(), "version": r.GetVersion(), "summary": r.GetSummary(), "paper": r.GetPaper(),
		"complexity": r.GetComplexity(), "params": params,
		"capabilities":     map[string]any{"max_len_param": r.GetCapabilities().GetMaxLenParam(), "key_padding": r.GetCapabilities().GetKeyPadding()},
		"protocol_version": fmt.Sprintf("%d.%d", ProtocolVersion, r.GetProtocolMinor()), "sdk_version": r.GetSdkVersion(),
	}
}

func kindName(k pluginpb.Kind) string {
	if v, err := kindFromProto(k); err == nil {
		return string(v)
	}
	return k.String()
}

// exitWithParent ends the plugin when the host that started it is gone (killed with SIGKILL,
// say), so no orphan outlives it. It is the plugin-side, portable one of the two orphan guards;
// proc.go says why the host's Pdeathsig is kept as well.
func exitWithParent() {
	ppid := os.Getppid()
	for range time.Tick(500 * time.Millisecond) {
		if os.Getppid() != ppid {
			os.Exit(2)
		}
	}
}
