package zoo

import _ "embed"

// RegistryYAML is the repository's registry.yaml, the base layer of every registry lookup.
//
//go:embed registry.yaml
var RegistryYAML []byte

// SampleText is examples/text.txt: the default text for parity checks, so that comparisons
// run on real tokenized text rather than random ids.
//
//go:embed examples/text.txt
var SampleText []byte
