//go:build !linux

package mototest

import "syscall"

// childProcAttr returns nil: only Linux can tie the child's life to ours, so
// elsewhere a test binary killed before its cleanups run leaves servers behind.
func childProcAttr() *syscall.SysProcAttr {
	return nil
}
