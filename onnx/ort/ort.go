//go:build cgo

package ort

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	ortgo "github.com/yalue/onnxruntime_go"
	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Runtime is the process-wide ONNX Runtime environment. onnxruntime_go keeps one global
// environment per process, so Open initialises it once and every Runtime shares it; it is
// never destroyed (the process exit releases it).
type Runtime struct {
	// Version is the library's version string, e.g. "1.30.0".
	Version string
	// Path is the library file loaded.
	Path string
}

var (
	openOnce sync.Once
	openRT   *Runtime
	openErr  error
)

// Open loads the ONNX Runtime library (see LibraryPath) and initialises the environment the
// first time it is called; later calls return the same Runtime or the same error. It returns
// an error wrapping ErrNotFound when the library is not installed, and the loader's error when
// the file is not a usable ONNX Runtime (1.24 or newer).
func Open() (*Runtime, error) {
	openOnce.Do(func() {
		path, err := LibraryPath()
		if err != nil {
			openErr = err
			return
		}
		ortgo.SetSharedLibraryPath(path)
		if err := ortgo.InitializeEnvironment(ortgo.WithLogLevelError()); err != nil {
			openErr = fmt.Errorf("load ONNX Runtime from %s (needs version 1.24 or newer): %w", path, err)
			return
		}
		openRT = &Runtime{Version: ortgo.GetVersion(), Path: path}
	})
	return openRT, openErr
}

// Session is one model loaded into ONNX Runtime. Run may be called from several goroutines.
type Session struct {
	sess    *ortgo.DynamicAdvancedSession
	inputs  []IOInfo
	outputs []IOInfo
	mu      sync.Mutex
	closed  bool
	note    string
	// atLevel makes the session again at a lower optimization level, for a run that fails at
	// the default one (nil once the session is below it); replaced keeps the sessions a
	// fallback replaced, which a concurrent Run may still hold, until Close.
	atLevel  func(ortgo.GraphOptimizationLevel) (*ortgo.DynamicAdvancedSession, error)
	replaced []*ortgo.DynamicAdvancedSession
}

// fallbackLevels are the optimization levels tried, in order, when ONNX Runtime's default
// level fails on a valid graph.
var fallbackLevels = []ortgo.GraphOptimizationLevel{ortgo.GraphOptimizationLevelEnableBasic, ortgo.GraphOptimizationLevelDisableAll}

// NewSession loads a serialised ONNX model. It returns an error when the runtime is nil, or
// when ONNX Runtime rejects the model (its message says why).
func (r *Runtime) NewSession(model []byte, opts SessionOptions) (*Session, error) {
	if r == nil {
		return nil, errors.New("ort: runtime is nil (call Open)")
	}
	model, err := widenHalfOutputs(model)
	if err != nil {
		return nil, err
	}
	ins, outs, err := ortgo.GetInputOutputInfoWithONNXData(model)
	if err != nil {
		return nil, fmt.Errorf("onnxruntime: read model inputs and outputs: %w", err)
	}
	s := &Session{}
	var inNames, outNames []string
	for _, in := range ins {
		s.inputs = append(s.inputs, ioInfo(in))
		inNames = append(inNames, in.Name)
	}
	for _, out := range outs {
		s.outputs = append(s.outputs, ioInfo(out))
		outNames = append(outNames, out.Name)
	}
	s.atLevel = func(level ortgo.GraphOptimizationLevel) (*ortgo.DynamicAdvancedSession, error) {
		return createSession(model, inNames, outNames, opts, level)
	}
	s.sess, err = createSession(model, inNames, outNames, opts, -1)
	if err != nil {
		// ONNX Runtime's own graph optimizer can fail on a valid graph, when it loads the graph
		// or when it runs what it made of it (1.30's extended level fuses Gather(table,
		// Range(0, n)) into a Slice whose starts are not 1-D when Range's bounds are
		// one-element vectors: "Slice node ... Starts must be a 1-D array"). A graph that
		// loads at a lower level is run there, and Note says so; Run falls back the same way.
		s.atLevel = nil
		for _, level := range fallbackLevels {
			sess, err2 := createSession(model, inNames, outNames, opts, level)
			if err2 == nil {
				s.sess = sess
				s.note = fmt.Sprintf("optimization level %s: its default level failed: %s", levelName(level), firstLine(err.Error()))
				return s, nil
			}
		}
		return nil, fmt.Errorf("onnxruntime: load model: %w", err)
	}
	return s, nil
}

// Note says how the session departs from ONNX Runtime's defaults ("" when it does not): the
// optimization level it fell back to, and why.
func (s *Session) Note() string { return s.note }

func levelName(l ortgo.GraphOptimizationLevel) string {
	if l == ortgo.GraphOptimizationLevelEnableBasic {
		return "basic"
	}
	return "disabled"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// createSession creates a session with opts at the optimization level (< 0: ONNX Runtime's
// default). It is a variable so that a test can make the default level fail.
var createSession = func(model []byte, inNames, outNames []string, opts SessionOptions, level ortgo.GraphOptimizationLevel) (*ortgo.DynamicAdvancedSession, error) {
	so, err := ortgo.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("onnxruntime: session options: %w", err)
	}
	defer so.Destroy()
	if level >= 0 {
		if err := so.SetGraphOptimizationLevel(level); err != nil {
			return nil, fmt.Errorf("onnxruntime: set optimization level: %w", err)
		}
	}
	// Every error of ONNX Runtime comes back from its calls (and a failed run at the default
	// level may be retried lower): its own log line of the same error would only repeat it.
	if err := so.SetLogSeverityLevel(ortgo.LoggingLevelFatal); err != nil {
		return nil, fmt.Errorf("onnxruntime: session options: %w", err)
	}
	if opts.Threads > 0 {
		if err := so.SetIntraOpNumThreads(opts.Threads); err != nil {
			return nil, fmt.Errorf("onnxruntime: set %d threads: %w", opts.Threads, err)
		}
		if err := so.SetInterOpNumThreads(1); err != nil {
			return nil, fmt.Errorf("onnxruntime: set inter-op threads: %w", err)
		}
	}
	// ORT's intra-op workers spin after a Run until they time out; in a process that also
	// runs zoo (parity, zoo bench --against) they would take a core from zoo's next run.
	// Stopping them at the end of each Run leaves ORT's own timing unchanged (they still
	// spin between the operators of a run).
	if err := so.AddSessionConfigEntry("session.force_spinning_stop", "1"); err != nil {
		return nil, fmt.Errorf("onnxruntime: session options: %w", err)
	}
	return ortgo.NewDynamicAdvancedSessionWithONNXData(model, inNames, outNames, so)
}

func ioInfo(in ortgo.InputOutputInfo) IOInfo {
	info := IOInfo{Name: in.Name, Dims: append([]int64{}, in.Dimensions...)}
	switch in.DataType {
	case ortgo.TensorElementDataTypeFloat:
		info.DType = tensor.Float32
	case ortgo.TensorElementDataTypeInt64:
		info.DType = tensor.Int64
	case ortgo.TensorElementDataTypeInt32:
		info.DType = tensor.Int32
	case ortgo.TensorElementDataTypeBool:
		info.DType = tensor.Bool
	case ortgo.TensorElementDataTypeFloat16:
		info.DType = tensor.Float16
	case ortgo.TensorElementDataTypeBFloat16:
		info.DType = tensor.BFloat16
	}
	return info
}

// widenHalfOutputs returns model with each float16 or bfloat16 graph output cast to float32
// inside the model (exactly: every 16-bit value is a float32), under its own name. The Go
// binding cannot hand back a 16-bit float output (it copies one byte per element and fails),
// so a session over such a model returns float32 for them; zoo's Model.Run widens its own
// 16-bit outputs the same way. A model without one is returned as it is.
func widenHalfOutputs(model []byte) ([]byte, error) {
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(model, &m); err != nil {
		return model, nil // ONNX Runtime says what is wrong with it
	}
	g := m.GetGraph()
	isInput := map[string]bool{}
	for _, in := range g.GetInput() {
		isInput[in.GetName()] = true
	}
	changed := false
	for _, out := range g.GetOutput() {
		tt := out.GetType().GetTensorType()
		dt := onnxpb.TensorProto_DataType(tt.GetElemType())
		if tt == nil || (dt != onnxpb.TensorProto_FLOAT16 && dt != onnxpb.TensorProto_BFLOAT16) || isInput[out.GetName()] {
			continue
		}
		name, half := out.GetName(), out.GetName()+"/zoo_half"
		for _, n := range g.GetNode() {
			for i, v := range n.Output {
				if v == name {
					n.Output[i] = half
				}
			}
			for i, v := range n.Input {
				if v == name {
					n.Input[i] = half
				}
			}
		}
		for _, in := range g.GetInitializer() {
			if in.GetName() == name {
				in.Name = half
			}
		}
		g.Node = append(g.Node, &onnxpb.NodeProto{Name: half + "/widen", OpType: "Cast", Input: []string{half}, Output: []string{name},
			Attribute: []*onnxpb.AttributeProto{{Name: "to", Type: onnxpb.AttributeProto_INT, I: int64(onnxpb.TensorProto_FLOAT)}}})
		tt.ElemType = int32(onnxpb.TensorProto_FLOAT)
		changed = true
	}
	if !changed {
		return model, nil
	}
	data, err := proto.Marshal(&m)
	if err != nil {
		return nil, fmt.Errorf("onnxruntime: widen float16 outputs: %w", err)
	}
	return data, nil
}

// destroy releases v, which may be a typed nil the binding left after a failed conversion.
func destroy(v ortgo.Value) {
	if v != nil && !reflect.ValueOf(v).IsNil() {
		_ = v.Destroy()
	}
}

// Inputs returns the model's inputs in ONNX Runtime's order.
func (s *Session) Inputs() []IOInfo { return append([]IOInfo{}, s.inputs...) }

// Outputs returns the model's outputs in ONNX Runtime's order.
func (s *Session) Outputs() []IOInfo { return append([]IOInfo{}, s.outputs...) }

// Run executes the model. inputs must hold exactly the model's inputs, as float32, int64,
// int32 or bool tensors; outputNames selects the outputs to return (nil means all). It returns
// an error naming the input or output at fault for a missing, unknown or malformed tensor,
// and ONNX Runtime's error when the run fails.
func (s *Session) Run(inputs map[string]*tensor.Tensor, outputNames []string) (map[string]*tensor.Tensor, error) {
	s.mu.Lock()
	closed, sess := s.closed, s.sess
	s.mu.Unlock()
	if closed || sess == nil {
		return nil, errors.New("onnxruntime: session is closed")
	}
	for name := range inputs {
		if !hasName(s.inputs, name) {
			return nil, fmt.Errorf("onnxruntime: model has no input %q (inputs: %s)", name, names(s.inputs))
		}
	}
	want := outputNames
	if want == nil {
		for _, o := range s.outputs {
			want = append(want, o.Name)
		}
	}
	for _, name := range want {
		if !hasName(s.outputs, name) {
			return nil, fmt.Errorf("onnxruntime: model has no output %q (outputs: %s)", name, names(s.outputs))
		}
	}
	in := make([]ortgo.Value, len(s.inputs))
	defer func() {
		for _, v := range in {
			destroy(v)
		}
	}()
	for i, info := range s.inputs {
		t, ok := inputs[info.Name]
		if !ok || t == nil {
			return nil, fmt.Errorf("onnxruntime: input %q is missing", info.Name)
		}
		v, err := toValue(t)
		if err != nil {
			return nil, fmt.Errorf("onnxruntime: input %q: %w", info.Name, err)
		}
		in[i] = v
	}
	out := make([]ortgo.Value, len(s.outputs))
	defer func() {
		for _, v := range out {
			destroy(v)
		}
	}()
	if err := sess.Run(in, out); err != nil && !s.fallBack(sess, err, in, out) {
		return nil, fmt.Errorf("onnxruntime: run: %w", err)
	}
	res := make(map[string]*tensor.Tensor, len(want))
	for i, info := range s.outputs {
		if !contains(want, info.Name) {
			continue
		}
		t, err := fromValue(out[i])
		if err != nil {
			return nil, fmt.Errorf("onnxruntime: output %q: %w", info.Name, err)
		}
		res[info.Name] = t
	}
	return res, nil
}

// Close releases the session; it is safe to call twice.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.sess == nil {
		s.closed = true
		return nil
	}
	s.closed = true
	for _, old := range s.replaced {
		old.Destroy()
	}
	if err := s.sess.Destroy(); err != nil {
		return fmt.Errorf("onnxruntime: close session: %w", err)
	}
	return nil
}

// fallBack runs in into out again at a lower optimization level after failed, the session
// at ONNX Runtime's default level, failed with runErr, and reports whether that run
// succeeded. On success the lower level's session replaces the default one for every later
// Run and Note says so; when every level fails the same run, the input is at fault, not the
// optimizer, and the session stays as it was.
func (s *Session) fallBack(failed *ortgo.DynamicAdvancedSession, runErr error, in, out []ortgo.Value) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.sess != failed { // another Run fell back meanwhile
		return s.sess.Run(in, out) == nil
	}
	if s.atLevel == nil {
		return false
	}
	for _, level := range fallbackLevels {
		sess, err := s.atLevel(level)
		if err != nil {
			continue
		}
		if sess.Run(in, out) != nil {
			sess.Destroy()
			continue
		}
		s.replaced, s.sess, s.atLevel = append(s.replaced, failed), sess, nil
		s.note = fmt.Sprintf("optimization level %s: its default level failed: %s", levelName(level), firstLine(runErr.Error()))
		return true
	}
	return false
}

func toValue(t *tensor.Tensor) (ortgo.Value, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	shape := make(ortgo.Shape, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = int64(d)
	}
	switch t.DType {
	case tensor.Float32:
		return ortgo.NewTensor(shape, append([]float32{}, t.F32...))
	case tensor.Int64:
		return ortgo.NewTensor(shape, append([]int64{}, t.I64...))
	case tensor.Int32:
		d := make([]int32, len(t.I64))
		for i, v := range t.I64 {
			d[i] = int32(v)
		}
		return ortgo.NewTensor(shape, d)
	case tensor.Bool:
		return ortgo.NewTensor(shape, append([]bool{}, t.Bool...))
	case tensor.Float16, tensor.BFloat16:
		raw := make([]byte, 2*len(t.F32))
		for i, v := range t.F32 {
			b := tensor.Float16Bits(v)
			if t.DType == tensor.BFloat16 {
				b = tensor.BFloat16Bits(v)
			}
			binary.LittleEndian.PutUint16(raw[2*i:], b)
		}
		dt := ortgo.TensorElementDataType(ortgo.TensorElementDataTypeFloat16)
		if t.DType == tensor.BFloat16 {
			dt = ortgo.TensorElementDataTypeBFloat16
		}
		if len(raw) == 0 {
			return nil, errors.New("an empty 16-bit float tensor cannot be passed to ONNX Runtime's Go binding")
		}
		return ortgo.NewCustomDataTensor(shape, raw, dt)
	}
	return nil, fmt.Errorf("unsupported dtype %v", t.DType)
}

func fromValue(v ortgo.Value) (*tensor.Tensor, error) {
	if v == nil {
		return nil, errors.New("ONNX Runtime returned no value")
	}
	dims := v.GetShape()
	shape := make([]int, len(dims))
	for i, d := range dims {
		shape[i] = int(d)
	}
	var t *tensor.Tensor
	switch x := v.(type) {
	case *ortgo.Tensor[float32]:
		t = &tensor.Tensor{DType: tensor.Float32, Shape: shape, F32: append([]float32{}, x.GetData()...)}
	case *ortgo.Tensor[int64]:
		t = &tensor.Tensor{DType: tensor.Int64, Shape: shape, I64: append([]int64{}, x.GetData()...)}
	case *ortgo.Tensor[int32]:
		d := x.GetData()
		t = &tensor.Tensor{DType: tensor.Int32, Shape: shape, I64: make([]int64, len(d))}
		for i, v := range d {
			t.I64[i] = int64(v)
		}
	case *ortgo.Tensor[bool]:
		t = &tensor.Tensor{DType: tensor.Bool, Shape: shape, Bool: append([]bool{}, x.GetData()...)}
	default:
		return nil, fmt.Errorf("unsupported ONNX Runtime value %T", v)
	}
	if err := t.Check(); err != nil {
		return nil, err
	}
	return t, nil
}

func hasName(infos []IOInfo, name string) bool {
	for _, i := range infos {
		if i.Name == name {
			return true
		}
	}
	return false
}

func names(infos []IOInfo) string {
	s := ""
	for i, in := range infos {
		if i > 0 {
			s += ", "
		}
		s += in.Name
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
