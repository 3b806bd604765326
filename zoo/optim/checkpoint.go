package optim

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// Keys of the checkpoint files' safetensors metadata.
const (
	// MetaFormat names the optimizer file's layout, so a later zoo can tell old files.
	MetaFormat = "zoo_optim_format"
	// MetaStep is the number of optimizer steps a checkpoint holds; both files carry it so
	// that a resume can tell a matching pair from a pair torn by a kill between the writes.
	MetaStep = "zoo_step"
	// MetaOptimizer, MetaWeightDecay, MetaBetas, MetaEps and MetaMomentum record Hyper.
	MetaOptimizer   = "optimizer"
	MetaWeightDecay = "weight_decay"
	MetaBetas       = "betas"
	MetaEps         = "eps"
	MetaMomentum    = "momentum"
)

// formatVersion is the optimizer file's layout: tensors named as torch.optim's per-parameter
// state ("exp_avg.NAME", "exp_avg_sq.NAME", "momentum_buffer.NAME") plus an int64 scalar
// "step".
const formatVersion = "1"

// StepTensor names the step count in the optimizer file.
const StepTensor = "step"

// OptimPath returns the optimizer file that goes with a model checkpoint:
// model.safetensors → model.optim.safetensors (another extension gets ".optim.safetensors"
// appended).
func OptimPath(modelPath string) string {
	if base, ok := strings.CutSuffix(modelPath, ".safetensors"); ok {
		return base + ".optim.safetensors"
	}
	return modelPath + ".optim.safetensors"
}

// stateNames returns the torch.optim state keys the optimizer keeps per parameter.
func (o *Optimizer) stateNames() []string {
	switch {
	case o.v != nil:
		return []string{"exp_avg", "exp_avg_sq"}
	case o.m != nil:
		return []string{"momentum_buffer"}
	}
	return nil
}

func (o *Optimizer) stateBufs() [][]float32 {
	switch {
	case o.v != nil:
		return [][]float32{o.m, o.v}
	case o.m != nil:
		return [][]float32{o.m}
	}
	return nil
}

// WriteState writes the optimizer's moments, step count and hyperparameters as a
// safetensors file; extra metadata (e.g. the training configuration) is added to the
// header. It returns the writer's error, or an error for an extra key that clashes.
func (o *Optimizer) WriteState(w io.Writer, extra map[string]string) error {
	meta := map[string]string{
		MetaFormat:      formatVersion,
		MetaStep:        strconv.FormatInt(o.step, 10),
		MetaOptimizer:   o.hyper.Optimizer,
		MetaWeightDecay: fmtFloat(o.hyper.WeightDecay),
	}
	if o.hyper.Optimizer == AdamW {
		meta[MetaBetas] = fmtFloat(o.hyper.Beta1) + "," + fmtFloat(o.hyper.Beta2)
		meta[MetaEps] = fmtFloat(o.hyper.Eps)
	} else {
		meta[MetaMomentum] = fmtFloat(o.hyper.Momentum)
	}
	for k, v := range extra {
		if _, clash := meta[k]; clash {
			return fmt.Errorf("optimizer state: metadata key %q is reserved", k)
		}
		meta[k] = v
	}
	list := []tensorio.Named{{Name: StepTensor, Tensor: &tensor.Tensor{DType: tensor.Int64, Shape: []int{}, I64: []int64{o.step}}}}
	for s, prefix := range o.stateNames() {
		for i, t := range o.layout.Tensors(o.stateBufs()[s]) {
			list = append(list, tensorio.Named{Name: prefix + "." + o.layout.Names[i], Tensor: t})
		}
	}
	return tensorio.WriteSafetensors(w, list, meta)
}

// ReadState restores the moments and step count written by WriteState into o, which must
// have been made by New with the same optimizer (and, for SGD, momentum on or off) over the
// same layout; the other hyperparameters may differ (they are the caller's to check). It
// returns the file's metadata, or an error naming the missing, unexpected or misshaped
// tensor or the mismatched optimizer.
func (o *Optimizer) ReadState(data []byte) (map[string]string, error) {
	list, meta, err := tensorio.ReadSafetensors(data)
	if err != nil {
		return nil, err
	}
	if f := meta[MetaFormat]; f != formatVersion {
		return nil, fmt.Errorf("not a zoo optimizer state (format %q, want %q)", f, formatVersion)
	}
	if got := meta[MetaOptimizer]; got != o.hyper.Optimizer {
		return nil, fmt.Errorf("the state is %s's, this run uses %s", got, o.hyper.Optimizer)
	}
	byName := make(map[string]*tensor.Tensor, len(list))
	for _, nt := range list {
		byName[nt.Name] = nt.Tensor
	}
	st := byName[StepTensor]
	if st == nil || st.DType != tensor.Int64 || len(st.I64) != 1 || st.I64[0] < 0 {
		return nil, fmt.Errorf("tensor %q: want one non-negative int64", StepTensor)
	}
	if s := meta[MetaStep]; s != strconv.FormatInt(st.I64[0], 10) {
		return nil, fmt.Errorf("metadata %s=%q disagrees with tensor %s=%d", MetaStep, s, StepTensor, st.I64[0])
	}
	want := 1
	bufs := make([][]float32, len(o.stateBufs()))
	for s, prefix := range o.stateNames() {
		buf, err := o.layout.gather(prefix+".", func(name string) *tensor.Tensor { return byName[name] })
		if err != nil {
			return nil, err
		}
		bufs[s] = buf
		want += o.layout.Len()
	}
	if len(list) != want {
		for _, nt := range list {
			prefix, name, _ := strings.Cut(nt.Name, ".")
			known := nt.Name == StepTensor
			for _, p := range o.stateNames() {
				known = known || (p == prefix && o.layout.Index(name) >= 0)
			}
			if !known {
				return nil, fmt.Errorf("unexpected tensor %s (this %s run keeps %s)", nt.Name, o.hyper.Optimizer, strings.Join(o.stateNames(), ", "))
			}
		}
	}
	for s, dst := range o.stateBufs() {
		copy(dst, bufs[s])
	}
	o.step = st.I64[0]
	return meta, nil
}

// StateDict is a model's state to checkpoint: every tensor of its state_dict under its
// PyTorch name, parameters and buffers alike.
type StateDict []tensorio.Named

// pendingSuffix names the optimizer state of a checkpoint being written: it is complete on
// disk before the model file is replaced, and renamed over the optimizer file after.
const pendingSuffix = ".next"

// SaveCheckpoint writes a model checkpoint and its optimizer state beside it
// (OptimPath(modelPath)), both stamped with the step count, so that a kill at any moment
// leaves a pair that LoadCheckpoint can resume: the new optimizer state is written
// atomically (tensorio.AtomicWriteFile) to OptimPath+".next", then the model file atomically,
// then the ".next" file is renamed over the optimizer file. A kill after the model's rename
// leaves the new model with the new state still under ".next", which LoadCheckpoint finds.
// modelMeta is added to the model file's header.
func SaveCheckpoint(modelPath string, state StateDict, modelMeta map[string]string, o *Optimizer, optimMeta map[string]string) error {
	op := OptimPath(modelPath)
	pending := op + pendingSuffix
	if err := tensorio.AtomicWriteFile(pending, func(w io.Writer) error { return o.WriteState(w, optimMeta) }); err != nil {
		return err
	}
	meta := map[string]string{MetaStep: strconv.FormatInt(o.step, 10)}
	for k, v := range modelMeta {
		meta[k] = v
	}
	if err := tensorio.AtomicWriteFile(modelPath, func(w io.Writer) error {
		return tensorio.WriteSafetensors(w, state, meta)
	}); err != nil {
		os.Remove(pending)
		return err
	}
	if err := os.Rename(pending, op); err != nil {
		return fmt.Errorf("write %s: %w", op, err)
	}
	return nil
}

// RemoveStaleTemps removes the temporary files that SaveCheckpoint(modelPath, ...) calls
// killed mid-write left next to modelPath (tensorio.RemoveStaleTemps of the model file, the
// optimizer file and its pending state), and returns their names. The pending state itself is
// LoadCheckpoint's to complete or remove. Call it before saving, when no other process saves
// to modelPath.
func RemoveStaleTemps(modelPath string) ([]string, error) {
	var removed []string
	for _, p := range []string{modelPath, OptimPath(modelPath), OptimPath(modelPath) + pendingSuffix} {
		r, err := tensorio.RemoveStaleTemps(p)
		removed = append(removed, r...)
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// LoadCheckpoint reads a checkpoint pair for --resume: the model file's tensors and
// metadata, and the optimizer state restored into o. When the optimizer file is behind the
// model file and the pending state of an interrupted SaveCheckpoint matches the model, it
// completes that save first. It returns an error naming the file at fault, and one saying
// which file is newer when the two still hold different step counts.
func LoadCheckpoint(modelPath string, o *Optimizer) (StateDict, map[string]string, map[string]string, error) {
	data, err := os.ReadFile(modelPath)
	if err != nil {
		return nil, nil, nil, err
	}
	list, modelMeta, err := tensorio.ReadSafetensors(data)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", modelPath, err)
	}
	op := OptimPath(modelPath)
	if pdata, err := os.ReadFile(op + pendingSuffix); err == nil {
		if _, pmeta, err := tensorio.ReadSafetensors(pdata); err == nil && pmeta[MetaStep] == modelMeta[MetaStep] {
			if err := os.Rename(op+pendingSuffix, op); err != nil {
				return nil, nil, nil, fmt.Errorf("complete the interrupted save of %s: %w", op, err)
			}
		} else {
			os.Remove(op + pendingSuffix) // a save killed before its model file was replaced
		}
	}
	odata, err := os.ReadFile(op)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("optimizer state of %s: %w (--resume needs both files that -o writes)", modelPath, err)
	}
	optimMeta, err := o.ReadState(odata)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	if ms, ostep := modelMeta[MetaStep], optimMeta[MetaStep]; ms != ostep {
		return nil, nil, nil, fmt.Errorf("%s is at step %s but %s at step %s; resume from a matching pair or train from --weights %s",
			modelPath, orNone(ms), op, ostep, modelPath)
	}
	return list, modelMeta, optimMeta, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none recorded)"
	}
	return s
}

func fmtFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
