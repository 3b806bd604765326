package cpu

import (
	"testing"

	"github.com/zoo-dev/zoo/backends/backendtest"
)

func TestConformance(t *testing.T) { backendtest.Run(t, Backend{}) }
