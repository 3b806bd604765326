package plugin

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/plugin/pluginpb"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// MaxModelBytes bounds the model a plugin may announce: 2 GiB, protobuf's (and so a
// self-contained ONNX model's) limit. The host allocates the announced size up front.
const MaxModelBytes = 2 << 30

// BuildStats says what one Build moved and how long it took.
type BuildStats struct {
	Bytes  int64
	Chunks int
	// Stream is the time from the request to the trailer (the plugin's build, export and the
	// transfer); Transfer the part from the header to the trailer (the bytes alone); Import
	// the time onnx.Import took on the host.
	Stream, Transfer, Import time.Duration
}

// Build asks the plugin for the model of cfg and seed and imports it as a graph.
func (c *Client) Build(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, error) {
	g, _, err := c.BuildStats(ctx, cfg, seed)
	return g, err
}

// BuildStats is Build that also reports the transfer's size and timings.
func (c *Client) BuildStats(ctx context.Context, cfg variant.Config, seed uint64) (*graph.Graph, BuildStats, error) {
	data, st, err := c.receive(ctx, cfg, seed, 0)
	if err != nil {
		return nil, st, err
	}
	// data is the one buffer the chunks were received into: Import reads it in place.
	t := time.Now()
	g, err := onnx.Import(data)
	st.Import = time.Since(t)
	if err != nil {
		return nil, st, c.fail(ErrInvalidGraph, err, "returned an invalid graph: "+err.Error(), c.blame())
	}
	if err := CheckContract(c.desc, g); err != nil {
		return nil, st, c.fail(ErrInvalidGraph, err, "returned a graph that breaks zoo's encoder contract: "+err.Error(), c.blame())
	}
	return g, st, nil
}

func (c *Client) blame() string {
	if c.path == "" {
		return "this is a bug in the variant"
	}
	return "this is a bug in the plugin: check it with `zoo plugin test " + c.path + "`"
}

// BuildONNX asks the plugin for the serialized ONNX model of cfg and seed (at opset, 0 for
// the plugin's default) and checks the stream: one header, chunks of at most MaxChunkBytes
// adding up to the announced size, a trailer whose CRC-32C matches.
func (c *Client) BuildONNX(ctx context.Context, cfg variant.Config, seed uint64, opset int) ([]byte, BuildStats, error) {
	return c.receive(ctx, cfg, seed, opset)
}

// crcTable is the CRC-32C (Castagnoli) table of the Build stream's checksum; hash/crc32 uses
// the CPU's CRC32 instructions for it where there are some (SSE 4.2, ARMv8).
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// receive runs a Build stream and returns the bytes once the trailer's CRC-32C has been
// checked. The bytes land in one buffer of the announced size, allocated when the header
// arrives: data chunks are copied into it straight from gRPC's frame buffers (see chunkSink)
// and the checksum is updated as each chunk lands.
func (c *Client) receive(ctx context.Context, cfg variant.Config, seed uint64, opset int) ([]byte, BuildStats, error) {
	var st BuildStats
	wire, err := ConfigToProto(cfg)
	if err != nil {
		return nil, st, &Error{Kind: ErrConfig, Plugin: c.name, Msg: err.Error(), Err: err}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.opts.BuildTimeout, errBuildTimeout)
	defer cancel()
	start := time.Now()
	stream, err := c.rpc.Build(ctx, &pluginpb.BuildRequest{Config: wire, Seed: seed, Opset: int32(opset), MaxChunkBytes: MaxChunkBytes},
		grpc.ForceCodecV2(newBuildCodec()))
	if err != nil {
		return nil, st, c.callError("Build", ctx, err, errBuildTimeout, c.opts.BuildTimeout, BuildTimeoutEnv)
	}
	violation := func(format string, args ...any) ([]byte, BuildStats, error) {
		cancel()
		return nil, st, c.fail(ErrProtocolViolation, nil, "broke the Build stream: "+fmt.Sprintf(format, args...), c.blame())
	}
	var (
		sink      chunkSink
		header    time.Time
		total     int64 = -1
		gotHeader bool
	)
	for {
		err := stream.RecvMsg(&sink)
		if errors.Is(err, io.EOF) {
			return violation("the stream ended without a trailer after %d of %d bytes", sink.n, total)
		}
		if err != nil {
			return nil, st, c.callError("Build", ctx, err, errBuildTimeout, c.opts.BuildTimeout, BuildTimeoutEnv)
		}
		if sink.data >= 0 { // a data chunk, taken by the fast path
			if err := sink.checkChunk(sink.data, total); err != "" {
				return violation("%s", err)
			}
			sink.n += sink.data
			st.Chunks++
			continue
		}
		switch part := sink.msg.GetPart().(type) {
		case *pluginpb.BuildChunk_Header:
			if gotHeader {
				return violation("a second header")
			}
			gotHeader, header = true, time.Now()
			total = part.Header.GetTotalBytes()
			if f := part.Header.GetFormat(); f != "onnx" {
				return violation("format %q, want onnx", f)
			}
			if total <= 0 || total > MaxModelBytes {
				return violation("announced %d bytes (want 1 to %d: a self-contained ONNX model is one protobuf message, at most 2 GiB)", total, int64(MaxModelBytes))
			}
			sink.dst = make([]byte, total)
		case *pluginpb.BuildChunk_Data:
			if !gotHeader {
				return violation("data before the header")
			}
			d := part.Data
			if err := sink.checkChunk(len(d), total); err != "" {
				return violation("%s", err)
			}
			sink.sum = crc32.Update(sink.sum, crcTable, d)
			sink.n += copy(sink.dst[sink.n:], d)
			st.Chunks++
		case *pluginpb.BuildChunk_Trailer:
			if !gotHeader {
				return violation("a trailer before the header")
			}
			if int64(sink.n) != total {
				return violation("%d bytes, but the header announced %d", sink.n, total)
			}
			st.Bytes, st.Stream, st.Transfer = total, time.Since(start), time.Since(header)
			if want := part.Trailer.GetCrc32C(); sink.sum != want {
				return violation("the model's CRC-32C is %08x, the trailer says %08x (corrupted in transit?)", sink.sum, want)
			}
			return sink.dst, st, nil
		default:
			return violation("an empty message")
		}
	}
}

// checkChunk says what is wrong with a data chunk of size bytes, or returns "".
func (s *chunkSink) checkChunk(size int, total int64) string {
	switch {
	case size > MaxChunkBytes:
		return fmt.Sprintf("a chunk of %d bytes (at most %d)", size, MaxChunkBytes)
	case int64(s.n)+int64(size) > total:
		return fmt.Sprintf("more than the announced %d bytes", total)
	}
	return ""
}

// CheckContract checks what every zoo encoder graph promises: inputs tokens (int64) and, when
// the variant says so, key_padding_mask (bool); outputs hidden and logits of rank 3.
func CheckContract(d variant.Description, g *graph.Graph) error {
	if err := g.Validate(); err != nil {
		return err
	}
	inputs := map[string]graph.ValueInfo{}
	for _, in := range g.Inputs {
		inputs[in.Name] = in
	}
	if _, ok := inputs[variant.InputTokens]; !ok {
		return fmt.Errorf("no input %q", variant.InputTokens)
	}
	if _, ok := inputs[variant.InputKeyPadding]; d.Caps.KeyPadding && !ok {
		return fmt.Errorf("Describe says key padding is supported, but the graph has no input %q", variant.InputKeyPadding)
	}
	outputs := map[string]graph.ValueInfo{}
	for _, o := range g.Outputs {
		outputs[o.Name] = o
	}
	for _, name := range []string{variant.OutputHidden, variant.OutputLogits} {
		o, ok := outputs[name]
		if !ok {
			return fmt.Errorf("no output %q", name)
		}
		if len(o.Shape) != 3 {
			return fmt.Errorf("output %q has rank %d, want 3 (batch, sequence, features)", name, len(o.Shape))
		}
	}
	return nil
}
