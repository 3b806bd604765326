package zoo_test

import (
	"context"
	"fmt"
	"log"
	"math"

	"github.com/zoo-dev/zoo"
)

// Load builds a variant of the registry in process, with its deterministic weights.
func ExampleLoad() {
	ctx := context.Background()
	m, err := zoo.Load(ctx, "vanilla.tiny", zoo.LoadOptions{Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	info := m.Info()
	fmt.Println(info.Name, info.Parameters, "parameters, max length", info.MaxLen)
	for _, in := range info.Inputs {
		fmt.Println("input", in.Name, in.DType, "fed", in.Role)
	}
	fmt.Println("weights:", info.Weights)
	// Output:
	// vanilla.tiny 100097 parameters, max length 5000
	// input tokens int64 fed ids
	// input key_padding_mask bool fed padding
	// weights: random (seed 1)
}

// Embed gives one vector per text: here mean-pooled and L2-normalised, as
// sentence-transformers' encode does.
func ExampleEncoder_Embed() {
	ctx := context.Background()
	m, err := zoo.Load(ctx, "vanilla.tiny", zoo.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	enc, err := m.NewEncoder(zoo.EncoderOptions{Pool: zoo.PoolMean, Normalize: true})
	if err != nil {
		log.Fatal(err)
	}
	vecs, err := enc.Embed(ctx, "The cat sat on the mat.", "A dog slept in the sun.")
	if err != nil {
		log.Fatal(err)
	}
	var dot, norm float64
	for k := range vecs[0] {
		dot += float64(vecs[0][k]) * float64(vecs[1][k])
		norm += float64(vecs[0][k]) * float64(vecs[0][k])
	}
	fmt.Printf("%d vectors of %d, norm %.3f, cosine %.2f\n", len(vecs), len(vecs[0]), math.Sqrt(norm), dot)
	// Output:
	// 2 vectors of 64, norm 1.000, cosine 0.91
}

// An .onnx file exported from PyTorch (a small BERT) runs with its Hugging Face tokenizer:
// [CLS] and [SEP] in every window, token types and an attention mask fed by role.
func ExampleEncoder_Embed_onnx() {
	ctx := context.Background()
	m, err := zoo.Load(ctx, "cmd/zoo/testdata/bert/bert-opset17.onnx", zoo.LoadOptions{
		Tokenizer: "zoo/tokenize/testdata/minilm.tokenizer.json", // found by itself when it lies next to the model
	})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	enc, err := m.NewEncoder(zoo.EncoderOptions{Pool: zoo.PoolCLS})
	if err != nil {
		log.Fatal(err)
	}
	for _, in := range m.Info().Inputs {
		fmt.Println(in.Name, "←", in.Role)
	}
	vecs, err := enc.Embed(ctx, "Attention is all you need.")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d vector of %d\n", len(vecs), len(vecs[0]))
	// Output:
	// input_ids ← ids
	// attention_mask ← mask
	// token_type_ids ← types
	// 1 vector of 32
}

// Encode gives every token's output, with the window's ids.
func ExampleEncoder_Encode() {
	ctx := context.Background()
	m, err := zoo.Load(ctx, "vanilla.tiny", zoo.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	enc, err := m.NewEncoder(zoo.EncoderOptions{})
	if err != nil {
		log.Fatal(err)
	}
	out, err := enc.Encode(ctx, "héllo")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ids", out[0].IDs)
	fmt.Println("hidden", out[0].Outputs["hidden"].Shape, "logits", out[0].Outputs["logits"].Shape)
	// Output:
	// ids [105 196 170 109 109 112]
	// hidden [6 64] logits [6 257]
}
