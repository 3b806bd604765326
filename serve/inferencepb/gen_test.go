package inferencepb

import (
	"testing"

	"github.com/zoo-dev/zoo/internal/protogen"
)

// TestGenerated checks that the committed code is what gen.go's protoc line makes.
func TestGenerated(t *testing.T) { protogen.Check(t, ".") }
