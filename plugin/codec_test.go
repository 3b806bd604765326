package plugin

import (
	"bytes"
	"hash/crc32"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/plugin/pluginpb"
)

// TestBuildCodec checks the framed send path against the standard encoding and the direct
// receive path against the general one (a chunk split across frame buffers, a message the
// fast path must leave alone).
func TestBuildCodec(t *testing.T) {
	c := newBuildCodec()
	data := bytes.Repeat([]byte("zoo!"), 5000)
	msg := &pluginpb.BuildChunk{Part: &pluginpb.BuildChunk_Data{Data: data}}
	framed, err := c.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := proto.Marshal(msg)
	if got := framed.Materialize(); !bytes.Equal(got, want) {
		t.Fatalf("framed chunk differs from proto.Marshal (%d vs %d bytes)", len(got), len(want))
	}
	// Split across three buffers, the varint length straddling the first boundary.
	split := mem.BufferSlice{mem.SliceBuffer(want[:2]), mem.SliceBuffer(want[2:100]), mem.SliceBuffer(want[100:])}
	s := chunkSink{dst: make([]byte, len(data)+10), n: 10}
	if err := c.Unmarshal(split, &s); err != nil {
		t.Fatal(err)
	}
	if s.data != len(data) || !bytes.Equal(s.dst[10:], data) || s.sum != crc32.Checksum(data, crcTable) {
		t.Fatalf("fast path: data=%d, bytes equal %v", s.data, bytes.Equal(s.dst[10:], data))
	}
	// Too big for what is left: reported, not copied.
	s = chunkSink{dst: make([]byte, 10)}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(want)}, &s); err != nil || s.data != len(data) || s.checkChunk(s.data, 10) == "" {
		t.Fatalf("overflow: err %v, data %d", err, s.data)
	}
	// A trailing unknown field: the general path.
	odd := append(append([]byte(nil), want...), 0x38, 0x01) // field 7, varint 1
	s = chunkSink{dst: make([]byte, len(data))}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(odd)}, &s); err != nil || s.data != -1 || !bytes.Equal(s.msg.GetData(), data) {
		t.Fatalf("general path: err %v, data %d", err, s.data)
	}
}
