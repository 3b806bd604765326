// Package optim holds zoo's training-side numerics over flat parameter buffers: the AdamW
// and SGD steps (torch.optim's semantics, operation for operation in float32), clipping by
// global norm (torch.nn.utils.clip_grad_norm_), the learning-rate schedule of `zoo train`,
// and the optimizer half of a checkpoint (FILE.optim.safetensors beside the model's
// FILE.safetensors).
//
// Every parameter of a model lives in one []float32 (a Layout maps names to ranges), and so
// do the gradients and the optimizer's moments, so a step is one data-parallel loop whatever
// the number of tensors. The loops run on a ParallelFor the caller supplies (the CPU
// backend's worker pool in zoo train); reductions use a fixed block partition, so results
// never depend on the thread count.
package optim
