// Package zoo is the front door to zoo for Go programs: load a Transformer encoder (a variant
// of the registry, name[.preset], or an .onnx file with its tokenizer), then embed, encode or
// run it, in process, without cgo on the CPU backend.
//
//	m, err := zoo.Load(ctx, "vanilla.tiny", zoo.LoadOptions{})
//	enc, err := m.NewEncoder(zoo.EncoderOptions{Pool: zoo.PoolMean, Normalize: true})
//	vecs, err := enc.Embed(ctx, "first text", "second text") // one []float32 per text
//
// Load resolves the reference against the registry (the built-in registry.yaml, the user's
// os.UserConfigDir()/zoo/registry.yaml and LoadOptions.Registries), builds the variant with
// its deterministic weights (or imports the ONNX file), loads LoadOptions.Weights over them
// and chooses the tokenizer. Built-in variants are built in this process; third-party plugins
// run through the VariantSource given in LoadOptions.Plugins (see Plugins). The backend is
// compiled on first use: LoadOptions.Backend, else ZOO_BACKEND, the user's config file, then
// the fastest available (backends.Select).
//
// An Encoder feeds text by role (ids, masks, token types, positions), in windows of the
// model's maximum length, pools and normalises. Training lives in package
// github.com/zoo-dev/zoo/train, serving in github.com/zoo-dev/zoo/serve.
//
// Errors the caller can fix (a bad reference, option or input) are *InputError; they name
// the option at fault as LoadOptions.X or EncoderOptions.X. Everything else is a failure of
// the job (a plugin that crashed, a backend that failed). The package never prints, never
// exits and reads only the environment variables documented in `zoo help environment`.
package zoo
