package variant

// The input and output names every encoder graph of zoo uses: the contract between a variant,
// the host that feeds it text and the writers of its outputs. Graphs imported from other tools
// may use other names; these are what zoo's own variants and third-party plugins produce.
const (
	// InputTokens is the int64 (batch, seq) input of token ids.
	InputTokens = "tokens"
	// InputKeyPadding is the bool (batch, seq) input that is true at padded positions.
	InputKeyPadding = "key_padding_mask"
	// OutputHidden is the last layer's output, (batch, seq, d_model).
	OutputHidden = "hidden"
	// OutputLogits is the output projection, (batch, seq, vocab).
	OutputLogits = "logits"
	// DimBatch and DimSeq name the symbolic batch and sequence dimensions.
	DimBatch = "batch"
	DimSeq   = "seq"
)
