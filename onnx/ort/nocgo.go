//go:build !cgo

package ort

import (
	"errors"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

var errNoCgo = errors.New("ONNX Runtime support needs cgo: rebuild zoo with CGO_ENABLED=1 and a C compiler")

// Runtime is a loaded ONNX Runtime; without cgo it cannot be created.
type Runtime struct {
	// Version is the library's version string.
	Version string
	// Path is the library file loaded.
	Path string
}

// Session is a model loaded into ONNX Runtime; without cgo it cannot be created.
type Session struct{}

// Open always fails without cgo.
func Open() (*Runtime, error) { return nil, errNoCgo }

// NewSession always fails without cgo.
func (r *Runtime) NewSession(model []byte, opts SessionOptions) (*Session, error) {
	return nil, errNoCgo
}

// Inputs returns nothing without cgo.
func (s *Session) Inputs() []IOInfo { return nil }

// Outputs returns nothing without cgo.
func (s *Session) Outputs() []IOInfo { return nil }

// Run always fails without cgo.
func (s *Session) Run(inputs map[string]*tensor.Tensor, outputNames []string) (map[string]*tensor.Tensor, error) {
	return nil, errNoCgo
}

// Close does nothing without cgo.
func (s *Session) Close() error { return nil }

// Note is empty without cgo.
func (s *Session) Note() string { return "" }
