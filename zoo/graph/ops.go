package graph

// OpSpec gives the arity of an ONNX operator as zoo understands it (opset 17 semantics).
// MaxIn < 0 means variadic.
type OpSpec struct {
	MinIn, MaxIn   int
	MinOut, MaxOut int
}

// opSpecs lists the ai.onnx operators the IR accepts. Backends may support fewer; they say which.
var opSpecs = map[string]OpSpec{
	"Abs":                {1, 1, 1, 1},
	"Add":                {2, 2, 1, 1},
	"And":                {2, 2, 1, 1},
	"Cast":               {1, 1, 1, 1},
	"Concat":             {1, -1, 1, 1},
	"Constant":           {0, 0, 1, 1},
	"ConstantOfShape":    {1, 1, 1, 1},
	"Div":                {2, 2, 1, 1},
	"Elu":                {1, 1, 1, 1},
	"Equal":              {2, 2, 1, 1},
	"Erf":                {1, 1, 1, 1},
	"Exp":                {1, 1, 1, 1},
	"Expand":             {2, 2, 1, 1},
	"Gather":             {2, 2, 1, 1},
	"Gemm":               {2, 3, 1, 1},
	"Greater":            {2, 2, 1, 1},
	"Identity":           {1, 1, 1, 1},
	"LayerNormalization": {2, 3, 1, 3},
	"Less":               {2, 2, 1, 1},
	"Log":                {1, 1, 1, 1},
	"MatMul":             {2, 2, 1, 1},
	"Max":                {1, -1, 1, 1},
	"Min":                {1, -1, 1, 1},
	"Mul":                {2, 2, 1, 1},
	"Neg":                {1, 1, 1, 1},
	"Not":                {1, 1, 1, 1},
	"Or":                 {2, 2, 1, 1},
	"Pow":                {2, 2, 1, 1},
	"Range":              {3, 3, 1, 1},
	"ReduceMax":          {1, 2, 1, 1},
	"ReduceMean":         {1, 2, 1, 1},
	"ReduceSum":          {1, 2, 1, 1},
	"Relu":               {1, 1, 1, 1},
	"Reshape":            {2, 2, 1, 1},
	"Shape":              {1, 1, 1, 1},
	"Sigmoid":            {1, 1, 1, 1},
	"Slice":              {3, 5, 1, 1},
	"Softmax":            {1, 1, 1, 1},
	"Split":              {1, 2, 1, -1},
	"Sqrt":               {1, 1, 1, 1},
	"Squeeze":            {1, 2, 1, 1},
	"Sub":                {2, 2, 1, 1},
	"Tanh":               {1, 1, 1, 1},
	"Tile":               {2, 2, 1, 1},
	"Transpose":          {1, 1, 1, 1},
	"Unsqueeze":          {2, 2, 1, 1},
	"Where":              {3, 3, 1, 1},
}

// LookupOp returns the arity of op and whether the IR knows it.
func LookupOp(op string) (OpSpec, bool) {
	s, ok := opSpecs[op]
	return s, ok
}

// KnownOps returns the number of operators the IR accepts.
func KnownOps() int { return len(opSpecs) }
