// Package nn holds the encoder building blocks that variants compose into graphs: embedding,
// positional encodings, Linear, LayerNorm, the feed-forward block, the key-padding mask, the
// encoder layer with a pluggable attention block, and the hyperparameter schema that every
// variant shares. Each block names its parameters by PyTorch module path (so weights load into
// the equivalent nn.Module by name) and initialises them as PyTorch's defaults do, from the
// model seed.
//
// Where things go:
//   - nn.go: the Ctx that carries a build (builder, seed, context) and the generic blocks
//     (Linear, LayerNorm, Embedding, sinusoidal positions, FFN, heads, the padding mask);
//   - encoder.go: EncoderConfig, the encoder layer and the whole encoder around an
//     AttentionFunc, and the seed's multi-head attention;
//   - attend.go: pieces for attention blocks that differ from the seed's (scores with a bias,
//     the configurable scale, finite masking);
//   - schema.go: the shared hyperparameters (EncoderParams, AttentionParams), reading them
//     back (EncoderConfigFrom, AttentionOptionsFrom) and the build metadata every graph carries.
//
// A new block that more than one variant uses is a Ctx method in the file of its kind (a
// new family of blocks gets its own file), with a test beside it; a block only one variant
// needs stays in that variant's package (variants/NAME). A hyperparameter that
// more than one variant takes belongs in schema.go, with one name and one meaning.
// Blocks never import a backend, onnx/ or the plugin host: nn sits under every variant.
package nn
