package zoo

import (
	"context"
	"errors"

	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/variants"
	"github.com/zoo-dev/zoo/zoo/registry"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// VariantSource gives the variant of a registry entry: where its Describe comes from and where
// its Build runs. Load uses one for third-party plugins (LoadOptions.Plugins); without one,
// built-in variants are built in this process and a third-party entry is an *InputError.
type VariantSource interface {
	Variant(ctx context.Context, e registry.Entry) (variant.Variant, error)
}

// Plugins returns a VariantSource that starts registry entries' plugin processes on host
// (built-in entries too, as host's HostOptions.Self or InProcess say). The caller owns host and
// closes it when its models are no longer built; a *plugin.Error whose BadInput is true comes
// back as an *InputError.
func Plugins(host *plugin.Host) VariantSource { return hostSource{host} }

type hostSource struct{ h *plugin.Host }

func (s hostSource) Variant(ctx context.Context, e registry.Entry) (variant.Variant, error) {
	spec := plugin.Spec{Name: e.Name, Builtin: e.IsBuiltin(), Args: e.Args, Env: e.Env, SHA256: e.SHA256, Source: e.Source}
	if !spec.Builtin {
		spec.Path = e.Plugin
	}
	c, err := s.h.Client(ctx, spec)
	if err != nil {
		return nil, PluginError(err)
	}
	return c, nil
}

// PluginError classifies an error of the plugin host: one the user must fix in the registry or
// the config (plugin.Error.BadInput) becomes an *InputError; anything else is returned as is.
func PluginError(err error) error {
	var pe *plugin.Error
	if errors.As(err, &pe) && !pe.BadInput() {
		return err
	}
	return inputErr("", err)
}

// builtinVariant returns the built-in variant of a registry entry that says plugin: builtin.
func builtinVariant(e registry.Entry) (variant.Variant, error) {
	v, ok := variants.Builtin()[e.Name]
	if !ok {
		return nil, inputErrf("", "registry entry %s says plugin: builtin, but this zoo binary has no built-in variant %q", e.Name, e.Name)
	}
	return v, nil
}

// variantOf returns e's variant, from src when there is one, else the built-in in process
// (inProcess true).
func variantOf(ctx context.Context, src VariantSource, e registry.Entry) (v variant.Variant, inProcess bool, err error) {
	if src != nil {
		v, err = src.Variant(ctx, e)
		return v, false, err
	}
	if e.IsBuiltin() {
		v, err = builtinVariant(e)
		return v, true, err
	}
	return nil, false, inputErrf("", "variant %s is a third-party plugin (%s): give a plugin host in LoadOptions.Plugins (zoo.Plugins(plugin.NewHost(...)))", e.Name, e.Plugin)
}
