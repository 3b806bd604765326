package train_test

import (
	"context"
	"fmt"
	"log"

	"github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/train"
)

// Run trains three steps of the tiny vanilla encoder on a short public-domain text, masked
// language modelling with AdamW, and reports each step through a hook.
func ExampleTrainer_Run() {
	ctx := context.Background()
	m, err := train.Load(ctx, "vanilla.tiny", train.MLM, zoo.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	cfg := train.DefaultConfig()
	cfg.Steps, cfg.Batch, cfg.Window, cfg.LR = 3, 2, 64, 1e-3
	data := train.Data{Train: train.File("../examples/corpus/kjv-ruth.txt")}
	tr, err := train.New(ctx, m, data, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	tr.OnStep(func(s train.Step) error {
		fmt.Printf("step %d: loss %.2f, %d tokens\n", s.Step, s.Loss, s.Tokens)
		return nil
	})
	res, err := tr.Run(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("trained steps %d–%d of %s (%d parameters)\n", res.StartStep+1, res.Step, m.Name(), tr.Parameters())
	// Output:
	// step 1: loss 5.76, 128 tokens
	// step 2: loss 5.53, 128 tokens
	// step 3: loss 5.59, 128 tokens
	// trained steps 1–3 of vanilla.tiny (100097 parameters)
}
