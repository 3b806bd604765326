// Package zoo carries the repository files that the zoo binary embeds.
package zoo

import _ "embed"

// RegistryYAML is the repository's registry.yaml, the base layer of every registry lookup.
//
//go:embed registry.yaml
var RegistryYAML []byte
