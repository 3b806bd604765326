// Package plugin puts encoder variants behind hashicorp/go-plugin processes that speak the
// gRPC protocol in package pluginpb.
//
// Plugin side (the SDK): a plugin's main calls Serve with any variant.Variant:
//
//	func main() { plugin.Serve(myvariant.New()) }
//
// Host side: a Host launches plugins lazily (one process per plugin, reused by every Build of
// the command) and hands back a *Client, which is a variant.Variant: its Describe is the
// plugin's answer and its Build streams the plugin's ONNX model and imports it. Each plugin
// runs in a process group of its own; Close kills the groups (proc.go explains why). Every
// wait on a plugin is bounded: the start by HostOptions.StartTimeout, a Build by
// BuildTimeout, both by the caller's context, and the clean-up after a kill by a grace
// period. Every failure of a plugin (missing, not executable, not a plugin, wrong checksum,
// wrong protocol version, crash, hang, invalid graph) is an *Error whose message is one line
// that names the plugin and says what to do.
//
// In-process mode serves a Go variant on a goroutine through the same gRPC server code and
// attaches to it with go-plugin's reattach support: for tests and debuggers.
package plugin

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/plugin/pluginpb"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// ProtocolVersion is the major version of the plugin protocol, negotiated in go-plugin's
// handshake. A plugin that speaks another major version is refused with a clear error.
// Version 2 ends the Build stream with a CRC-32C of the model's bytes (version 1 sent a hex
// sha256, which capped the stream at the hash's speed).
const ProtocolVersion = 2

// ProtocolMinor is the additive (minor) version this side of the protocol implements; it is
// exchanged in Describe.
const ProtocolMinor = 0

// SDKVersion is the version of this SDK, reported by plugins in Describe.
const SDKVersion = "0.2.0"

// MaxChunkBytes is the largest data chunk of a Build stream (1 MiB), below gRPC's default
// 4 MiB message cap so that plugins that forget to raise it still work.
const MaxChunkBytes = 1 << 20

// MaxMessageBytes caps every gRPC message on both sides (64 MiB). Bulk data never needs it;
// it stops a broken peer from exhausting memory with one giant message.
const MaxMessageBytes = 64 << 20

// PluginName is the go-plugin name under which the variant service is dispensed.
const PluginName = "variant"

// Handshake is the go-plugin handshake of zoo variant plugins. The cookie only tells a plugin
// binary that a zoo host started it; it is not a security measure.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   env.PluginCookie,
	MagicCookieValue: "7c1f5b0e-zoo-variant-plugin-d3a9c2e4",
}

// GRPCPlugin is the go-plugin glue for the variant service. On the plugin side it holds the
// variant to serve; on the host side it dispenses a pluginpb.VariantClient.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	// Impl is the served variant (plugin side only).
	Impl variant.Variant
	// Service, when set, replaces the default server built from Impl (plugin side only).
	Service pluginpb.VariantServer
}

// GRPCServer registers the variant service (plugin side).
func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	srv := p.Service
	if srv == nil {
		if p.Impl == nil {
			return fmt.Errorf("plugin: nothing to serve (GRPCPlugin has neither Impl nor Service)")
		}
		srv = NewServer(p.Impl)
	}
	pluginpb.RegisterVariantServer(s, srv)
	return nil
}

// GRPCClient returns a pluginpb.VariantClient on the connection (host side).
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pluginpb.NewVariantClient(c), nil
}

// pluginSets returns the go-plugin version map for a plugin or host speaking versions.
func pluginSets(p *GRPCPlugin, versions ...int) map[int]goplugin.PluginSet {
	out := map[int]goplugin.PluginSet{}
	for _, v := range versions {
		out[v] = goplugin.PluginSet{PluginName: p}
	}
	return out
}

// newGRPCServer is the plugin side's gRPC server factory: go-plugin's default keeps gRPC's
// 4 MiB receive cap, so it is raised here (and capped at MaxMessageBytes).
func newGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	opts = append(opts, grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
		// Bulk streams over a local socket: large flow-control windows and buffers keep the
		// 1 MiB chunks flowing without a round trip per 64 KiB.
		grpc.InitialWindowSize(windowBytes), grpc.InitialConnWindowSize(windowBytes),
		grpc.WriteBufferSize(bufferBytes), grpc.ReadBufferSize(bufferBytes),
		// Data chunks are framed around the model's bytes instead of being copied.
		grpc.ForceServerCodecV2(newBuildCodec()))
	return grpc.NewServer(opts...)
}

// Flow-control window and socket buffer sizes of plugin connections.
const (
	windowBytes = 16 << 20
	bufferBytes = 1 << 20
)

// dialOptions are the host side's gRPC options: the message cap and the bulk-stream tuning.
func dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		grpc.WithInitialWindowSize(windowBytes), grpc.WithInitialConnWindowSize(windowBytes),
		grpc.WithWriteBufferSize(bufferBytes), grpc.WithReadBufferSize(bufferBytes),
	}
}

// DescriptionToProto converts a description to its wire form.
func DescriptionToProto(d variant.Description) (*pluginpb.DescribeResponse, error) {
	out := &pluginpb.DescribeResponse{
		Name: d.Name, Version: d.Version, Summary: d.Summary, Paper: d.Paper, Complexity: d.Complexity,
		Capabilities:  &pluginpb.Capabilities{MaxLenParam: d.Caps.MaxLenParam, KeyPadding: d.Caps.KeyPadding},
		ProtocolMinor: ProtocolMinor, SdkVersion: SDKVersion,
		Features: []string{"build.crc32c"},
	}
	for _, p := range d.Params {
		kind, err := kindToProto(p.Kind)
		if err != nil {
			return nil, fmt.Errorf("hyperparameter %s: %w", p.Name, err)
		}
		def, err := ValueToProto(p.Default)
		if err != nil {
			return nil, fmt.Errorf("hyperparameter %s: default: %w", p.Name, err)
		}
		pp := &pluginpb.Param{Name: p.Name, Kind: kind, Default: def, Doc: p.Doc, Choices: p.Choices}
		if p.Min != nil {
			pp.HasMin, pp.Min = true, *p.Min
		}
		out.Params = append(out.Params, pp)
	}
	return out, nil
}

// DescriptionFromProto converts a Describe answer back, checking that every default has its
// parameter's kind.
func DescriptionFromProto(r *pluginpb.DescribeResponse) (variant.Description, error) {
	d := variant.Description{
		Name: r.GetName(), Version: r.GetVersion(), Summary: r.GetSummary(), Paper: r.GetPaper(),
		Complexity: r.GetComplexity(),
		Caps:       variant.Capabilities{MaxLenParam: r.GetCapabilities().GetMaxLenParam(), KeyPadding: r.GetCapabilities().GetKeyPadding()},
	}
	if d.Name == "" {
		return d, fmt.Errorf("Describe returned no name")
	}
	// zoo list, zoo show and the describe cache print these strings on a terminal: a control
	// character (an escape sequence, a newline) would rewrite what the user sees.
	for _, f := range []struct{ what, s string }{{"name", d.Name}, {"version", d.Version}, {"summary", d.Summary},
		{"paper", d.Paper}, {"complexity", d.Complexity}, {"max_len_param", d.Caps.MaxLenParam}} {
		if err := printable(f.what, f.s); err != nil {
			return d, err
		}
	}
	seen := map[string]bool{}
	for _, pp := range r.GetParams() {
		if pp.GetName() == "" || seen[pp.GetName()] {
			return d, fmt.Errorf("Describe returned an empty or duplicate hyperparameter name %q", pp.GetName())
		}
		for _, s := range append([]string{pp.GetName(), pp.GetDoc()}, pp.GetChoices()...) {
			if err := printable("hyperparameter "+strconv.Quote(pp.GetName()), s); err != nil {
				return d, err
			}
		}
		seen[pp.GetName()] = true
		kind, err := kindFromProto(pp.GetKind())
		if err != nil {
			return d, fmt.Errorf("hyperparameter %s: %w", pp.GetName(), err)
		}
		def := ValueFromProto(pp.GetDefault())
		if !kindMatches(kind, def) {
			return d, fmt.Errorf("hyperparameter %s: default %v (%T) is not of kind %s", pp.GetName(), def, def, kind)
		}
		p := variant.Param{Name: pp.GetName(), Kind: kind, Default: def, Doc: pp.GetDoc(), Choices: pp.GetChoices()}
		if pp.GetHasMin() {
			p.Min = variant.MinOf(pp.GetMin())
		}
		d.Params = append(d.Params, p)
	}
	if mp := d.Caps.MaxLenParam; mp != "" {
		if p, ok := d.Param(mp); !ok || p.Kind != variant.KindInt {
			return d, fmt.Errorf("capability max_len_param names %q, which is not an int hyperparameter", mp)
		}
	}
	return d, nil
}

// printable refuses a Describe string with a control character.
func printable(what, s string) error {
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return fmt.Errorf("Describe returned a %s with a control character (U+%04X at byte %d); the strings a plugin describes itself with are printed as they are and must be printable", what, r, i)
	}
	return nil
}

func kindMatches(k variant.Kind, v any) bool {
	switch v.(type) {
	case int64:
		return k == variant.KindInt
	case float64:
		return k == variant.KindFloat
	case bool:
		return k == variant.KindBool
	case string:
		return k == variant.KindString
	}
	return false
}

func kindToProto(k variant.Kind) (pluginpb.Kind, error) {
	switch k {
	case variant.KindInt:
		return pluginpb.Kind_KIND_INT, nil
	case variant.KindFloat:
		return pluginpb.Kind_KIND_FLOAT, nil
	case variant.KindBool:
		return pluginpb.Kind_KIND_BOOL, nil
	case variant.KindString:
		return pluginpb.Kind_KIND_STRING, nil
	}
	return 0, fmt.Errorf("unknown kind %q", k)
}

func kindFromProto(k pluginpb.Kind) (variant.Kind, error) {
	switch k {
	case pluginpb.Kind_KIND_INT:
		return variant.KindInt, nil
	case pluginpb.Kind_KIND_FLOAT:
		return variant.KindFloat, nil
	case pluginpb.Kind_KIND_BOOL:
		return variant.KindBool, nil
	case pluginpb.Kind_KIND_STRING:
		return variant.KindString, nil
	}
	return "", fmt.Errorf("unknown kind %v", k)
}

// ValueToProto converts an int, int64, float64, bool or string to its wire form.
func ValueToProto(v any) (*pluginpb.Value, error) {
	switch x := v.(type) {
	case int:
		return &pluginpb.Value{Value: &pluginpb.Value_IntValue{IntValue: int64(x)}}, nil
	case int64:
		return &pluginpb.Value{Value: &pluginpb.Value_IntValue{IntValue: x}}, nil
	case float64:
		return &pluginpb.Value{Value: &pluginpb.Value_FloatValue{FloatValue: x}}, nil
	case bool:
		return &pluginpb.Value{Value: &pluginpb.Value_BoolValue{BoolValue: x}}, nil
	case string:
		return &pluginpb.Value{Value: &pluginpb.Value_StringValue{StringValue: x}}, nil
	}
	return nil, fmt.Errorf("value %v has unsupported type %T (want int64, float64, bool or string)", v, v)
}

// ValueFromProto returns an int64, float64, bool or string; nil for an unset value.
func ValueFromProto(v *pluginpb.Value) any {
	switch x := v.GetValue().(type) {
	case *pluginpb.Value_IntValue:
		return x.IntValue
	case *pluginpb.Value_FloatValue:
		return x.FloatValue
	case *pluginpb.Value_BoolValue:
		return x.BoolValue
	case *pluginpb.Value_StringValue:
		return x.StringValue
	}
	return nil
}

// ConfigToProto converts a config to its wire form.
func ConfigToProto(cfg variant.Config) (map[string]*pluginpb.Value, error) {
	out := make(map[string]*pluginpb.Value, len(cfg))
	for _, k := range cfg.Keys() {
		v, err := ValueToProto(cfg[k])
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

// ConfigFromProto converts a wire config back. Ints stay int64, as variant.Resolve makes them.
func ConfigFromProto(m map[string]*pluginpb.Value) variant.Config {
	out := make(variant.Config, len(m))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out[k] = ValueFromProto(m[k])
	}
	return out
}

// chunkLimit returns the chunk size for a host's request: at most MaxChunkBytes.
func chunkLimit(req uint32) int {
	if req == 0 || req > MaxChunkBytes {
		return MaxChunkBytes
	}
	if req < 1024 {
		return 1024
	}
	return int(req)
}
