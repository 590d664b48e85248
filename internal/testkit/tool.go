package testkit

import (
	"os"
	"os/exec"
	"testing"
)

// ToolRequired is the value of a tool's environment variable (CFN_LINT,
// MOTO) that makes a missing tool fail the tests that need it rather than
// skip them. `make test` passes the variables on; .ci/run sets them to it.
const ToolRequired = "required"

// Tool is an outside program that some tests need and that the module cannot
// install itself, such as cfn-lint or moto_server (Python tools, installed
// with pip).
type Tool struct {
	// Name is the executable looked up on PATH.
	Name string
	// Env is the environment variable that says what a missing Name means:
	// "required" fails the test, "skip" skips it even when Name is there,
	// anything else ("auto", unset) skips it saying so.
	Env string
	// Install says how to get Name, for the skip or failure message.
	Install string
}

// Require returns the path of t's tool. When the tool is not on PATH it
// skips t with a message that names the tool and how to install it, or,
// when the tool's environment variable is "required", fails t with that
// message. When the variable is "skip" it skips t whatever PATH holds.
func (tool Tool) Require(t testing.TB) string {
	t.Helper()
	mode := os.Getenv(tool.Env)
	if mode == "skip" {
		t.Skipf("%s NOT run: %s=skip", tool.Name, tool.Env)
	}
	path, err := exec.LookPath(tool.Name)
	if err == nil {
		return path
	}
	msg := "%s NOT run: %s is not on PATH (%s)"
	if mode == ToolRequired {
		t.Fatalf(msg+"; %s=required", tool.Name, tool.Name, tool.Install, tool.Env)
	}
	t.Skipf(msg, tool.Name, tool.Name, tool.Install)
	return ""
}
