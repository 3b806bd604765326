// Package plugintest provides a small well-behaved variant and a set of misbehaving plugins,
// served by a test binary itself, for tests of plugin hosts with real processes:
//
//	func TestMain(m *testing.M) {
//		plugintest.MaybeServe() // serves and exits when a host started this binary as a plugin
//		os.Exit(m.Run())
//	}
//
// A test then starts os.Executable() as a plugin with ModeEnv set to one of the modes.
package plugintest

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/plugin/pluginpb"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// ModeEnv selects what the test binary does when started as a plugin; PidFileEnv, when set,
// names a file the plugin writes its pid to.
const (
	ModeEnv    = env.PluginTestMode
	PidFileEnv = env.PluginTestPidFile
)

// The modes.
const (
	ModeOK            = "ok"             // a good variant (Variant())
	ModeCrashBuild    = "crash-build"    // panics (uncaught) during Build
	ModeExitBuild     = "exit-build"     // writes to stderr and exits 3 during Build
	ModeHangBuild     = "hang-build"     // never answers Build (and creates BuildingFile)
	ModeHangStart     = "hang-start"     // never completes the handshake
	ModeStdout        = "stdout"         // prints to stdout and exits: not a plugin
	ModeProtocolOld   = "protocol-old"   // speaks only the protocol version before plugin.ProtocolVersion
	ModeGarbage       = "invalid-graph"  // streams bytes that are not ONNX
	ModeNoHidden      = "no-hidden"      // streams a valid ONNX graph without the hidden output
	ModeBadChecksum   = "bad-checksum"   // streams a trailer with a wrong CRC-32C
	ModeBadDescribe   = "bad-describe"   // Describe has a default of the wrong kind
	ModeNondeterminst = "nondeterminist" // different weights for the same seed
	ModeBlob          = "blob"           // streams 64 MiB of bytes (not a model) at once: transfer benchmarks

	// Plugins that leave a process behind: a grandchild in a session of its own (setsid),
	// which writes its pid to GrandchildFile.
	ModeSetsidBuild  = "setsid-build"  // starts the grandchild in Build, then never answers
	ModeSetsidExit   = "setsid-exit"   // starts the grandchild in Build, then exits 3
	ModeSetsidDaemon = "setsid-daemon" // double-forks the grandchild at start (its parent exits), then serves well
	ModeOrphanExit   = "orphan-exit"   // double-forks a grandchild in its group that exits at once, then serves well
)

// blob is the payload of ModeBlob, made once per process.
var blob = func() []byte {
	b := make([]byte, 64<<20)
	for i := range b {
		b[i] = byte(i * 131)
	}
	return b
}

// MaybeServe serves the mode in ModeEnv and exits, or returns at once when it is unset.
func MaybeServe() {
	mode := os.Getenv(ModeEnv)
	if mode == "" {
		return
	}
	if f := os.Getenv(PidFileEnv); f != "" {
		_ = os.WriteFile(f, []byte(fmt.Sprint(os.Getpid())), 0o644)
	}
	v := Variant()
	switch mode {
	case ModeOK:
		plugin.Serve(v)
	case ModeOrphanExit:
		if err := StartOrphan(); err != nil {
			fmt.Fprintln(os.Stderr, "plugintest:", err)
			os.Exit(2)
		}
		plugin.Serve(v)
	case ModeSetsidDaemon:
		if err := StartGrandchild(true); err != nil {
			fmt.Fprintln(os.Stderr, "plugintest:", err)
			os.Exit(2)
		}
		plugin.Serve(v)
	case ModeSetsidBuild, ModeSetsidExit:
		plugin.Serve(faulty{v, mode})
	case ModeCrashBuild, ModeExitBuild, ModeHangBuild, ModeNondeterminst:
		plugin.Serve(faulty{v, mode})
	case ModeHangStart:
		fmt.Fprintln(os.Stderr, "plugintest: hanging before the handshake")
		time.Sleep(time.Hour)
	case ModeStdout:
		fmt.Println("hello, I am not a plugin")
		os.Exit(0)
	case ModeProtocolOld:
		hs := plugin.Handshake
		hs.ProtocolVersion = plugin.ProtocolVersion - 1
		goplugin.Serve(&goplugin.ServeConfig{
			HandshakeConfig:  hs,
			VersionedPlugins: map[int]goplugin.PluginSet{plugin.ProtocolVersion - 1: {plugin.PluginName: &plugin.GRPCPlugin{Impl: v}}},
			GRPCServer:       goplugin.DefaultGRPCServer,
		})
	case ModeGarbage, ModeNoHidden, ModeBadChecksum, ModeBadDescribe, ModeBlob:
		goplugin.Serve(&goplugin.ServeConfig{
			HandshakeConfig:  plugin.Handshake,
			VersionedPlugins: map[int]goplugin.PluginSet{plugin.ProtocolVersion: {plugin.PluginName: &plugin.GRPCPlugin{Service: &rawServer{VariantServer: plugin.NewServer(v), mode: mode}}}},
			GRPCServer:       goplugin.DefaultGRPCServer,
		})
	default:
		fmt.Fprintf(os.Stderr, "plugintest: unknown mode %q\n", mode)
		os.Exit(2)
	}
	os.Exit(0)
}

// Variant returns a small, correct encoder variant ("testvar": multi-head attention, post-LN).
func Variant() variant.Variant { return testVariant{} }

type testVariant struct{}

// Describe returns the test variant's schema.
func (testVariant) Describe() variant.Description {
	one := variant.MinOf(1)
	return variant.Description{
		Name: "testvar", Version: "0.0.1", Summary: "a small test encoder", Complexity: "O(n²)",
		Params: []variant.Param{
			{Name: "vocab", Kind: variant.KindInt, Default: int64(257), Doc: "vocabulary", Min: one},
			{Name: "d_model", Kind: variant.KindInt, Default: int64(32), Doc: "width", Min: one},
			{Name: "heads", Kind: variant.KindInt, Default: int64(2), Doc: "heads", Min: one},
			{Name: "layers", Kind: variant.KindInt, Default: int64(1), Doc: "layers", Min: one},
			{Name: "d_ff", Kind: variant.KindInt, Default: int64(64), Doc: "FFN width", Min: one},
			{Name: "max_len", Kind: variant.KindInt, Default: int64(128), Doc: "longest sequence", Min: one},
		},
		Caps: variant.Capabilities{MaxLenParam: "max_len", KeyPadding: true},
	}
}

// Build builds the test encoder.
func (testVariant) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	e := nn.EncoderConfig{Vocab: cfg.Int("vocab"), DModel: cfg.Int("d_model"), Layers: cfg.Int("layers"), DFF: cfg.Int("d_ff"),
		MaxLen: cfg.Int("max_len"), PosEncoding: "sinusoidal", Activation: "relu", LNEps: 1e-5}
	if h := cfg.Int("heads"); e.DModel%h != 0 {
		return nil, fmt.Errorf("testvar: heads=%d must divide d_model=%d", h, e.DModel)
	}
	return nn.NewCtx(ctx, "testvar", seed).Encoder(e, nn.MultiHeadAttention(e.DModel, cfg.Int("heads")))
}

// faulty misbehaves in Build.
type faulty struct {
	variant.Variant
	mode string
}

var calls int

func (f faulty) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	switch f.mode {
	case ModeCrashBuild:
		fmt.Fprintln(os.Stderr, "plugintest: building, then crashing")
		done := make(chan struct{})
		go func() { panic("plugintest: crash during Build") }()
		<-done
	case ModeExitBuild:
		log.Print("plugintest: out of cheese") // the log package writes to the real stderr
		os.Exit(3)
	case ModeHangBuild:
		if f := os.Getenv(PidFileEnv); f != "" {
			_ = os.WriteFile(BuildingFile(f), []byte("building\n"), 0o644)
		}
		select {}
	case ModeNondeterminst:
		calls++
		seed += uint64(calls)
	case ModeSetsidBuild, ModeSetsidExit:
		if err := StartGrandchild(false); err != nil {
			return nil, err
		}
		if f.mode == ModeSetsidExit {
			os.Exit(3)
		}
		if f := os.Getenv(PidFileEnv); f != "" {
			_ = os.WriteFile(BuildingFile(f), []byte("building\n"), 0o644)
		}
		select {}
	}
	return f.Variant.Build(ctx, cfg, seed)
}

var blobData []byte

// rawServer breaks the protocol in Describe or Build.
type rawServer struct {
	pluginpb.VariantServer
	mode string
}

func (r *rawServer) Describe(ctx context.Context, req *pluginpb.DescribeRequest) (*pluginpb.DescribeResponse, error) {
	resp, err := r.VariantServer.Describe(ctx, req)
	if err == nil && r.mode == ModeBadDescribe {
		resp.Params[0].Default = &pluginpb.Value{Value: &pluginpb.Value_StringValue{StringValue: "many"}}
	}
	return resp, err
}

func (r *rawServer) Build(req *pluginpb.BuildRequest, stream pluginpb.Variant_BuildServer) error {
	switch r.mode {
	case ModeGarbage:
		return plugin.SendModel(stream, []byte("this is not an ONNX model"), 0)
	case ModeBlob:
		if blobData == nil {
			blobData = blob()
		}
		return plugin.SendModel(stream, blobData, 0)
	case ModeNoHidden:
		b := graph.NewBuilder("nohidden")
		x := b.Input(variant.InputTokens, tensor.Int64, graph.Sym("batch"), graph.Sym("seq"))
		pad := b.Input(variant.InputKeyPadding, tensor.Bool, graph.Sym("batch"), graph.Sym("seq"))
		b.Output("out", b.Op("Identity", []string{x}, nil), tensor.Int64, graph.Sym("batch"), graph.Sym("seq"))
		b.Output("mask", b.Op("Identity", []string{pad}, nil), tensor.Bool, graph.Sym("batch"), graph.Sym("seq"))
		g, err := b.Build()
		if err != nil {
			return err
		}
		data, err := onnx.Export(g, onnx.ExportOptions{})
		if err != nil {
			return err
		}
		return plugin.SendModel(stream, data, 0)
	case ModeBadChecksum:
		_ = stream.Send(&pluginpb.BuildChunk{Part: &pluginpb.BuildChunk_Header{Header: &pluginpb.BuildHeader{TotalBytes: 3, Format: "onnx"}}})
		_ = stream.Send(&pluginpb.BuildChunk{Part: &pluginpb.BuildChunk_Data{Data: []byte("abc")}})
		return stream.Send(&pluginpb.BuildChunk{Part: &pluginpb.BuildChunk_Trailer{Trailer: &pluginpb.BuildTrailer{Crc32C: 0}}})
	}
	return r.VariantServer.Build(req, stream)
}
