package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/version"
)

// TestVersionCommand: `slidegate version` prints the binary's version
// (version.Version: the build's stamp when there is one), and nothing on
// standard error. tests/version_test.go shows that `make slidegate`
// stamps it.
func TestVersionCommand(t *testing.T) {
	for _, arg := range []string{"version", "-version", "--version"} {
		var stdout, stderr bytes.Buffer
		e := env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
			getenv: func(string) string { return "" }, environ: func() []string { return nil }}
		if code := run(context.Background(), []string{arg}, e); code != exitOK {
			t.Fatalf("slidegate %s: exit %d, stderr %q", arg, code, stderr.String())
		}
		if want := "slidegate " + version.Version() + "\n"; stdout.String() != want || stderr.Len() != 0 {
			t.Errorf("slidegate %s printed %q (stderr %q), want %q", arg, stdout.String(), stderr.String(), want)
		}
	}
}
