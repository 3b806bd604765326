//go:build !unix

package plugintest

import "syscall"

// setsidAttr: sessions are a Unix notion.
func setsidAttr() *syscall.SysProcAttr { return nil }
