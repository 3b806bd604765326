package plugin

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"google.golang.org/grpc/encoding"
	gproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/plugin/pluginpb"
)

// chunkSink receives one message of a Build stream on the host. A data chunk goes straight
// from gRPC's frame buffers into dst (the model's buffer) at offset n, without the two copies
// that decoding it as a pluginpb.BuildChunk costs (materialising the frames into one buffer,
// then copying the bytes field out of it); any other message is decoded into msg.
type chunkSink struct {
	dst []byte // the model's buffer, allocated at the header; nil before
	n   int    // bytes of dst filled so far (set by receive)
	// After a RecvMsg: data is the size of a data chunk that took the fast path, copied to
	// dst[n:n+data] and added to sum unless it was too big for MaxChunkBytes or for what is
	// left of dst (receive then reports it); -1 when the message is in msg.
	data int
	sum  uint32 // running CRC-32C of the data chunks copied so far
	msg  pluginpb.BuildChunk
}

// buildCodec is the codec of Build streams on both sides; it changes nothing on the wire. The
// plugin side sends a data chunk as its 1 to 11 bytes of framing followed by the model's own
// bytes (not copied into a marshal buffer); the host side takes chunkSink messages by the
// direct path. Every other message goes through the standard proto codec.
type buildCodec struct{ proto encoding.CodecV2 }

func newBuildCodec() buildCodec { return buildCodec{proto: encoding.GetCodecV2(gproto.Name)} }

// Marshal encodes v; a BuildChunk holding data references the data instead of copying it, so
// the data must not change until the stream ends (SendModel's callers guarantee it).
func (c buildCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*pluginpb.BuildChunk); ok {
		if d, ok := m.GetPart().(*pluginpb.BuildChunk_Data); ok && len(d.Data) >= 4096 && len(m.ProtoReflect().GetUnknown()) == 0 {
			head := binary.AppendUvarint([]byte{dataTag}, uint64(len(d.Data)))
			return mem.BufferSlice{mem.SliceBuffer(head), mem.SliceBuffer(d.Data)}, nil
		}
	}
	return c.proto.Marshal(v)
}

func (c buildCodec) Name() string { return gproto.Name }

// The wire tag of BuildChunk.data: field 2, length-delimited.
const dataTag = 2<<3 | 2

func (c buildCodec) Unmarshal(data mem.BufferSlice, v any) error {
	s, ok := v.(*chunkSink)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	s.data = -1
	s.msg.Reset()
	// The fast path: the message is exactly one data field (what every encoder writes for a
	// chunk), and the header has been seen. Anything else is decoded the general way.
	var head [binary.MaxVarintLen64 + 1]byte
	h := copyPrefix(head[:], data)
	total := data.Len()
	if s.dst != nil && h > 1 && head[0] == dataTag {
		size, k := binary.Uvarint(head[1:h])
		if k > 0 && uint64(1+k)+size == uint64(total) {
			if size > MaxChunkBytes || size > uint64(len(s.dst)-s.n) {
				s.data = int(min(size, 1<<62))
				return nil
			}
			dst := s.dst[s.n : s.n+int(size)]
			copyFrom(dst, data, 1+k)
			s.sum = crc32.Update(s.sum, crcTable, dst)
			s.data = int(size)
			return nil
		}
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if err := proto.Unmarshal(buf.ReadOnlyData(), &s.msg); err != nil {
		return fmt.Errorf("failed to unmarshal a Build chunk: %w", err)
	}
	return nil
}

// copyPrefix copies the first len(dst) bytes of data (fewer if it is shorter) into dst.
func copyPrefix(dst []byte, data mem.BufferSlice) int {
	n := 0
	for _, b := range data {
		n += copy(dst[n:], b.ReadOnlyData())
		if n == len(dst) {
			break
		}
	}
	return n
}

// copyFrom copies data, from byte offset skip on, into dst (which must fit it exactly).
func copyFrom(dst []byte, data mem.BufferSlice, skip int) {
	n := 0
	for _, b := range data {
		d := b.ReadOnlyData()
		if skip >= len(d) {
			skip -= len(d)
			continue
		}
		n += copy(dst[n:], d[skip:])
		skip = 0
	}
}
