// Package train trains zoo's variants on text, in process: the forward pass, the loss and
// every parameter's gradient compiled as one program on the model's backend, AdamW or SGD
// over one flat parameter buffer (torch.optim's semantics), checkpoints that resume bit for
// bit, and evaluation on held-out text. It is what `zoo train`, `zoo eval`, `zoo compare`
// and `zoo profile --train` run.
//
//	m, err := train.Load(ctx, "vanilla.tiny", train.MLM, zoo.LoadOptions{})
//	cfg := train.DefaultConfig()
//	cfg.Steps, cfg.Output = 1000, "model.safetensors"
//	tr, err := train.New(ctx, m, train.Data{Train: train.File("corpus.txt")}, cfg)
//	defer tr.Close()
//	tr.OnStep(func(s train.Step) error { log.Printf("step %d loss %.4f", s.Step, s.Loss); return nil })
//	res, err := tr.Run(ctx)
//
// Step k (1-based) trains on windows (k-1)·B … k·B-1 of the text (B = Config.Batch), cut as
// `zoo run` cuts text with zoo's byte tokenizer and taken cyclically (Config.Shuffle: in a
// seeded order). Config.Output receives the model's state_dict (PyTorch names) and, beside
// it, the optimizer's moments and step count; Config.Resume continues such a checkpoint
// (ReadCheckpoint, Checkpoint.Continue) so that its losses equal an uninterrupted run's bit
// for bit. Run stops when its context ends, saving the last finished step first
// (*StoppedError). Evaluate scores any model, a variant or an .onnx file, on a text.
//
// Errors the caller can fix are *zoo.InputError naming the option at fault (Config.Batch,
// Data.Train, EvalConfig.Window, or package zoo's LoadOptions.X); OptionNames lists them.
// The package never prints, never exits and reads no flags.
package train
