package graph

// Helpers for the ops that encoder building blocks use most; each returns the output name.

// Add returns a + b (broadcasting).
func (b *Builder) Add(x, y string) string { return b.Op("Add", []string{x, y}, nil) }

// Sub returns a - b (broadcasting).
func (b *Builder) Sub(x, y string) string { return b.Op("Sub", []string{x, y}, nil) }

// Mul returns a * b (broadcasting).
func (b *Builder) Mul(x, y string) string { return b.Op("Mul", []string{x, y}, nil) }

// Div returns a / b (broadcasting).
func (b *Builder) Div(x, y string) string { return b.Op("Div", []string{x, y}, nil) }

// MatMul returns the numpy-style matrix product.
func (b *Builder) MatMul(x, y string) string { return b.Op("MatMul", []string{x, y}, nil) }

// Relu returns max(x, 0).
func (b *Builder) Relu(x string) string { return b.Op("Relu", []string{x}, nil) }

// Softmax returns softmax over axis.
func (b *Builder) Softmax(x string, axis int64) string {
	return b.Op("Softmax", []string{x}, Attrs{"axis": Int(axis)})
}

// Transpose permutes x's axes.
func (b *Builder) Transpose(x string, perm ...int64) string {
	return b.Op("Transpose", []string{x}, Attrs{"perm": Ints(perm...)})
}

// Reshape reshapes x to shape (ONNX semantics: 0 copies a dimension, -1 infers one).
func (b *Builder) Reshape(x string, shape ...int64) string {
	return b.Op("Reshape", []string{x, b.ConstInts(shape...)}, nil)
}

// Unsqueeze inserts size-1 axes.
func (b *Builder) Unsqueeze(x string, axes ...int64) string {
	return b.Op("Unsqueeze", []string{x, b.ConstInts(axes...)}, nil)
}

// Gather picks entries of data along axis.
func (b *Builder) Gather(data, indices string, axis int64) string {
	return b.Op("Gather", []string{data, indices}, Attrs{"axis": Int(axis)})
}

// LayerNorm normalises over the last axis with scale and bias.
func (b *Builder) LayerNorm(x, scale, bias string, eps float32) string {
	return b.Op("LayerNormalization", []string{x, scale, bias}, Attrs{"axis": Int(-1), "epsilon": Float(eps)})
}

// Where selects x where cond is true, else y.
func (b *Builder) Where(cond, x, y string) string { return b.Op("Where", []string{cond, x, y}, nil) }

// Shape returns x's shape as a 1-D int64 value.
func (b *Builder) Shape(x string) string { return b.Op("Shape", []string{x}, nil) }

// Slice takes x[starts:ends] on axes, where starts and ends are value names.
func (b *Builder) Slice(x, starts, ends, axes string) string {
	return b.Op("Slice", []string{x, starts, ends, axes}, nil)
}
