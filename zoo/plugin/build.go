package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/plugin/pluginpb"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// MaxModelBytes bounds the model a plugin may announce (8 GiB).
const MaxModelBytes = 8 << 30

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
	data, st, verify, err := c.receive(ctx, cfg, seed, 0)
	if err != nil {
		return nil, st, err
	}
	// The checksum's last chunks are still being hashed: import meanwhile, on another core.
	t := time.Now()
	g, err := onnx.Import(data)
	st.Import = time.Since(t)
	if verr := verify(); verr != nil {
		return nil, st, verr
	}
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
// adding up to the announced size, a trailer whose sha256 matches.
func (c *Client) BuildONNX(ctx context.Context, cfg variant.Config, seed uint64, opset int) ([]byte, BuildStats, error) {
	data, st, verify, err := c.receive(ctx, cfg, seed, opset)
	if err != nil {
		return nil, st, err
	}
	if err := verify(); err != nil {
		return nil, st, err
	}
	return data, st, nil
}

// receive runs a Build stream and returns the bytes and a verify function that waits for the
// checksum (computed alongside the stream) and checks it against the trailer's.
func (c *Client) receive(ctx context.Context, cfg variant.Config, seed uint64, opset int) ([]byte, BuildStats, func() error, error) {
	var st BuildStats
	wire, err := ConfigToProto(cfg)
	if err != nil {
		return nil, st, nil, &Error{Kind: ErrConfig, Plugin: c.name, Msg: err.Error(), Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.BuildTimeout)
	defer cancel()
	start := time.Now()
	stream, err := c.rpc.Build(ctx, &pluginpb.BuildRequest{Config: wire, Seed: seed, Opset: int32(opset), MaxChunkBytes: MaxChunkBytes})
	if err != nil {
		return nil, st, nil, c.callError("Build", ctx, err, c.opts.BuildTimeout, BuildTimeoutEnv)
	}
	violation := func(format string, args ...any) ([]byte, BuildStats, func() error, error) {
		cancel()
		return nil, st, nil, c.fail(ErrProtocolViolation, nil, "broke the Build stream: "+fmt.Sprintf(format, args...), c.blame())
	}
	var (
		buf       []byte
		header    time.Time
		total     int64 = -1
		gotHeader bool
	)
	// The checksum runs on another goroutine, fed with the regions of buf as they fill (buf
	// never reallocates: its capacity is the announced size).
	hashc := make(chan []byte, 64)
	sumc := make(chan string, 1)
	go func() {
		h := sha256.New()
		for b := range hashc {
			h.Write(b)
		}
		sumc <- hex.EncodeToString(h.Sum(nil))
	}()
	defer func() {
		if hashc != nil {
			close(hashc)
		}
	}()
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return violation("the stream ended without a trailer after %d of %d bytes", len(buf), total)
		}
		if err != nil {
			return nil, st, nil, c.callError("Build", ctx, err, c.opts.BuildTimeout, BuildTimeoutEnv)
		}
		switch part := msg.GetPart().(type) {
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
				return violation("announced %d bytes (want 1 to %d)", total, int64(MaxModelBytes))
			}
			buf = make([]byte, 0, total)
		case *pluginpb.BuildChunk_Data:
			if !gotHeader {
				return violation("data before the header")
			}
			d := part.Data
			if len(d) > MaxChunkBytes {
				return violation("a chunk of %d bytes (at most %d)", len(d), MaxChunkBytes)
			}
			if int64(len(buf)+len(d)) > total {
				return violation("more than the announced %d bytes", total)
			}
			buf = append(buf, d...)
			hashc <- buf[len(buf)-len(d):]
			st.Chunks++
		case *pluginpb.BuildChunk_Trailer:
			if !gotHeader {
				return violation("a trailer before the header")
			}
			if int64(len(buf)) != total {
				return violation("%d bytes, but the header announced %d", len(buf), total)
			}
			close(hashc)
			hashc = nil
			st.Bytes, st.Stream, st.Transfer = total, time.Since(start), time.Since(header)
			want := part.Trailer.GetSha256()
			verify := func() error {
				if got := <-sumc; got != want {
					return c.fail(ErrProtocolViolation, nil, fmt.Sprintf("broke the Build stream: the model's sha256 is %s, the trailer says %s (corrupted in transit?)", got, want), c.blame())
				}
				return nil
			}
			return buf, st, verify, nil
		default:
			return violation("an empty message")
		}
	}
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
	if _, ok := inputs[nn.InputTokens]; !ok {
		return fmt.Errorf("no input %q", nn.InputTokens)
	}
	if _, ok := inputs[nn.InputKeyPadding]; d.Caps.KeyPadding && !ok {
		return fmt.Errorf("Describe says key padding is supported, but the graph has no input %q", nn.InputKeyPadding)
	}
	outputs := map[string]graph.ValueInfo{}
	for _, o := range g.Outputs {
		outputs[o.Name] = o
	}
	for _, name := range []string{nn.OutputHidden, nn.OutputLogits} {
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
