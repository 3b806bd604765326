package lmdata

import (
	"fmt"
	"math"
)

// Score accumulates the cross-entropy of a model's logits against targets over any number of
// batches, in float64.
//
// For a counted position with log-probabilities log p (log-softmax of its logits over C
// classes) and target y, the plain cross-entropy is −log p_y, and with label smoothing ε the
// loss is PyTorch's F.cross_entropy(label_smoothing=ε): (1−ε)·(−log p_y) + (ε/C)·Σ_c (−log p_c).
// Positions whose target is IgnoreIndex (or any negative id) are skipped; the mean divides by
// the counted positions, as PyTorch's reduction="mean" with ignore_index does.
type Score struct {
	// Smoothing is the label smoothing ε in [0, 1].
	Smoothing float64
	// Loss and NLL are the sums over counted positions of the (smoothed) loss and of the plain
	// cross-entropy, in nats.
	Loss, NLL float64
	// Tokens is the number of counted positions, Correct those whose largest logit is the
	// target (the first largest, as torch.argmax), and Bytes the bytes of text their targets
	// stand for (Batch.TargetBytes).
	Tokens, Correct, Bytes int
}

// Add scores logits (B·N rows of vocab values, the (B, N, vocab) output flattened) against
// targets (B·N ids); bytes is the targets' byte count (Batch.TargetBytes). It returns an error
// when the sizes disagree or a target is outside the vocabulary; a NaN or infinite logit makes
// the sums NaN or infinite, as in PyTorch.
func (s *Score) Add(logits []float32, vocab int, targets []int64, bytes int) error {
	if vocab < 1 || len(logits) != len(targets)*vocab {
		return fmt.Errorf("lmdata: %d logits do not hold %d positions of %d classes", len(logits), len(targets), vocab)
	}
	for i, y := range targets {
		if y < 0 {
			continue
		}
		if y >= int64(vocab) {
			return fmt.Errorf("lmdata: target %d at position %d is outside the vocabulary of %d", y, i, vocab)
		}
		row := logits[i*vocab : (i+1)*vocab]
		mx, arg := math.Inf(-1), 0
		for c, v := range row {
			if float64(v) > mx {
				mx, arg = float64(v), c
			}
		}
		var sum, total float64
		for _, v := range row {
			sum += math.Exp(float64(v) - mx)
			total += float64(v)
		}
		lse := mx + math.Log(sum) // log Σ exp
		nll := lse - float64(row[y])
		// Σ_c −log p_c = C·lse − Σ_c logit_c
		smooth := float64(vocab)*lse - total
		s.NLL += nll
		s.Loss += (1-s.Smoothing)*nll + s.Smoothing/float64(vocab)*smooth
		s.Tokens++
		if int64(arg) == y {
			s.Correct++
		}
	}
	s.Bytes += bytes
	return nil
}

// MeanLoss is the mean (smoothed) loss per counted position (NaN when none are counted).
func (s *Score) MeanLoss() float64 { return s.Loss / float64(s.Tokens) }

// Perplexity is exp of the mean plain cross-entropy: label smoothing does not change it.
func (s *Score) Perplexity() float64 { return math.Exp(s.NLL / float64(s.Tokens)) }

// BitsPerByte is the plain cross-entropy in bits per byte of the counted targets' text:
// total nats / ln 2 / bytes (for the byte tokenizer, bits per predicted byte).
func (s *Score) BitsPerByte() float64 { return s.NLL / math.Ln2 / float64(s.Bytes) }

// Accuracy is the share of counted positions whose largest logit is the target.
func (s *Score) Accuracy() float64 { return float64(s.Correct) / float64(s.Tokens) }
