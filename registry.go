package zoo

import (
	"fmt"
	"sync"

	"github.com/zoo-dev/zoo/zoo/registry"
)

// builtinRegistry parses the embedded registry.yaml once: it is the same bytes for the life
// of the process.
var builtinRegistry = sync.OnceValues(func() (*registry.Registry, error) {
	r, err := registry.Parse("registry.yaml (built in)", RegistryYAML)
	if err != nil {
		return nil, fmt.Errorf("built-in registry: %w", err)
	}
	return r, nil
})

// Registry returns the registry models are resolved against: the built-in registry.yaml, the
// user's os.UserConfigDir()/zoo/registry.yaml when there is one, then each file of extra in
// order, later entries adding to or overriding earlier ones. A file that cannot be read or
// parsed is an *InputError naming it and the line at fault.
func Registry(extra ...string) (*registry.Registry, error) {
	base, err := builtinRegistry()
	if err != nil {
		return nil, err
	}
	layers := []*registry.Registry{base}
	user, err := registry.LoadUser()
	if err != nil {
		return nil, inputErr("", err)
	}
	if user != nil {
		layers = append(layers, user)
	}
	for _, path := range extra {
		r, err := registry.LoadFile(path)
		if err != nil {
			return nil, inputErr(optRegistry, err)
		}
		layers = append(layers, r)
	}
	return registry.Merge(layers...), nil
}
