// Package registryhelp is `zoo help registry`: what a registry.yaml is and whom zoo trusts
// when it reads one (the trust model that package registry and package plugin enforce).
package registryhelp

import (
	"fmt"
	"io"

	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/zoo/registry"
)

// Topic is the help topic's name: `zoo help registry`.
const Topic = "registry"

// text is the topic; its %s and %d come from the packages that hold those facts.
const text = `A registry (registry.yaml) lists variants and the plugin that serves each. zoo reads the
built-in one, then os.UserConfigDir()/zoo/registry.yaml, then --registry FILE.

A registry is code, like a Makefile: every entry with plugin: PATH names a program that zoo
runs, with your rights, when a command needs that variant (zoo list starts none). Read a
registry before you use it, as you would a script.

  plugin: builtin        a variant the zoo binary serves itself
  plugin: ./bin/myattn   a program in the registry file's folder: a relative path is resolved
                         there, and one whose .. leaves the folder is refused
  plugin: /opt/x/myattn  a program anywhere: only an absolute path may leave the folder
  sha256: "<64 hex>"     pins the program: zoo refuses to start a file whose sha256 differs
                         (sha256sum PATH); without it the plugin is unpinned and zoo runs
                         whatever the file holds at the time
  dev: true              a development build, rebuilt too often to pin

zoo list marks unpinned third-party plugins [unpinned] ([dev] with dev: true).
--require-pinned (accepted anywhere) or %s=1 refuses to start an unpinned
plugin, and says the sha256 to pin it with once you trust the file.

Plugins run in a process group of their own; on Linux zoo also kills every process a plugin
leaves behind (a daemon, a child that called setsid) when the plugin stops, on every exit
path. A registry's aliases (*name) may not expand the document past %d nodes a byte.
`

// Write writes the topic to w and returns w's error.
func Write(w io.Writer) error {
	_, err := fmt.Fprintf(w, text, plugin.RequirePinnedEnv, registry.ExpandPerByte)
	return err
}
