package plugin

import (
	"testing"

	"google.golang.org/grpc/mem"
)

// FuzzBuildCodec feeds arbitrary frames, split at an arbitrary point, to the host side of the
// Build stream codec (bytes a plugin sends): it must decode or refuse, never panic, and never
// write past the model's buffer.
func FuzzBuildCodec(f *testing.F) {
	f.Add([]byte{dataTag, 3, 'a', 'b', 'c'}, uint8(2), uint16(8))
	f.Add([]byte{dataTag, 0xff, 0xff, 0xff, 0xff, 0x0f}, uint8(1), uint16(4))
	f.Add([]byte{0x0a, 0x02, 0x08, 0x01}, uint8(0), uint16(0))
	f.Add([]byte{}, uint8(0), uint16(1))
	// One model buffer for every input (a worker runs them one at a time): allocating and
	// zeroing up to 64 KiB an input was most of the target's time.
	model := make([]byte, 1<<16)
	c := newBuildCodec()
	f.Fuzz(func(t *testing.T, frame []byte, split uint8, dstSize uint16) {
		at := min(int(split), len(frame))
		data := mem.BufferSlice{mem.SliceBuffer(frame[:at]), mem.SliceBuffer(frame[at:])}
		s := &chunkSink{}
		if dstSize > 0 {
			s.dst = model[:int(dstSize)]
			s.n = int(dstSize) / 3
		}
		if err := c.Unmarshal(data, s); err != nil {
			return
		}
		if s.data > 0 && s.data <= len(s.dst)-s.n && s.data > MaxChunkBytes {
			t.Errorf("accepted a %d-byte chunk above the %d-byte limit", s.data, MaxChunkBytes)
		}
	})
}
