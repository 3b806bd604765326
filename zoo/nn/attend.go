package nn

// Building blocks for attention variants whose conventions differ from the seed's: the
// configurable score scale (ScaleParam), scalar sequence lengths for Range, and a finite
// "minus infinity" for masks of patterns where a padded query row may have no key left.

// MaskedOut is the finite additive bias for a masked-out score in blocks that must never
// produce a NaN row: exp(MaskedOut - s) is exactly 0 in float32 for any score s a row with one
// unmasked key can hold, and a row with every key masked becomes a finite average instead of
// NaN (so padded rows cannot poison later layers through 0·NaN).
const MaskedOut = -1e9

// DotProductAttention computes softmax(scale(q·kᵀ) + bias)·v for q (B, h, nq, dk), k and v
// (B, h, nk, dk) and an additive bias broadcastable to the scores ("" for none), with the
// score scale of ScaleParam: 0 divides the scores by √dk after the product exactly as
// ScaledDotProduct does, 1 leaves them unscaled (T5's convention), another value multiplies.
func (c *Ctx) DotProductAttention(q, k, v, bias string, dk int, scale float64) string {
	return c.B.MatMul(c.B.Softmax(c.AttentionScores(q, k, bias, 4, dk, scale), -1), v)
}

// AttentionScores returns scale(q·kᵀ) + bias (ScaleScores, then the bias), before the
// softmax, for q and k of the given rank (≥ 2) whose last axis is dk; kᵀ swaps k's last two
// axes.
func (c *Ctx) AttentionScores(q, k, bias string, rank, dk int, scale float64) string {
	scores := c.ScaleScores(c.B.MatMul(q, c.TransposeLast2(k, rank)), dk, scale)
	if bias != "" {
		scores = c.B.Add(scores, bias)
	}
	return scores
}

// TransposeLast2 swaps the last two axes of x, a value of the given rank (≥ 2).
func (c *Ctx) TransposeLast2(x string, rank int) string {
	r := max(rank, 2)
	perm := make([]int64, r)
	for i := range perm {
		perm[i] = int64(i)
	}
	perm[r-1], perm[r-2] = perm[r-2], perm[r-1]
	return c.B.Transpose(x, perm...)
}

// ScalarSeqLen returns n, the sequence length of tokens (B, n), as an int64 scalar (the
// form Range takes).
func (c *Ctx) ScalarSeqLen(tokens string) string {
	return c.B.Op("Squeeze", []string{c.SeqLen(tokens), c.B.ConstInts(0)}, nil)
}
