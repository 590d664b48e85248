package tests

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/testkit"
)

// cfnLint is AWS's CloudFormation linter, which `make test` runs on every
// template through scripts/test-cfn-lint.sh.
var cfnLint = testkit.Tool{Name: "cfn-lint", Env: "CFN_LINT", Install: "pip install cfn-lint"}

// TestCfnLintFailsBrokenTemplates shows that the cfn-lint half of `make
// test` would catch the mistakes a template edit makes: it lints
// template.yaml and copies of it with one mistake each, through
// scripts/test-cfn-lint.sh as `make test` does, and wants each copy to fail
// with the rule that names the mistake and the original to pass.
func TestCfnLintFailsBrokenTemplates(t *testing.T) {
	cfnLint.Require(t)
	t.Parallel()
	raw, err := os.ReadFile(tplPath)
	if err != nil {
		t.Fatalf("read template: %v", err)
	}
	mutations := []struct {
		file      string // the copy's name, which its findings carry
		from, to  string // the one edit, at from's first place
		rule      string // the cfn-lint rule that must fire
		mentioned string // what its message must name
	}{
		// E3002: a property the resource type does not have.
		{"template-misspelt-property.yaml",
			"      AlarmDescription: Rate-limit denials", "      AlarmDescripton: Rate-limit denials",
			"E3002", "AlarmDescripton"},
		// E1010: Fn::GetAtt of a resource the template does not define.
		{"template-wrong-getatt.yaml",
			"IntegrationUri: !GetAtt ApiFunction.Arn\n", "IntegrationUri: !GetAtt ApiFuntion.Arn\n",
			"E1010", "ApiFuntion"},
		// W3037: an IAM action that does not exist, in a SAM function's
		// Policies; caught in the SAM translation (see the script).
		{"template-unknown-iam-action.yaml",
			"Action: apigateway:GET\n", "Action: apigateway:FETCH\n",
			"W3037", "'fetch'"},
	}
	dir := t.TempDir()
	original, err := filepath.Abs(tplPath)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{original}
	for _, m := range mutations {
		if !bytes.Contains(raw, []byte(m.from)) {
			t.Fatalf("%s: template has no %q (update the mutation)", m.file, m.from)
		}
		path := filepath.Join(dir, m.file)
		if err := os.WriteFile(path, bytes.Replace(raw, []byte(m.from), []byte(m.to), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, path)
	}

	cmd := exec.Command("../scripts/test-cfn-lint.sh", args...)
	cmd.Env = append(os.Environ(), "CFN_LINT=required")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("test-cfn-lint.sh on broken templates: %v, want exit status 1\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}

	// Parseable findings: FILE:LINE:COL:ENDLINE:ENDCOL:RULE:MESSAGE. A
	// finding in a SAM translation names TEMPLATE.sam.json.
	findings := map[string][]string{} // template stem -> "RULE:MESSAGE"
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 7)
		if len(parts) != 7 {
			continue
		}
		stem := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(parts[0]), ".yaml"), ".sam.json")
		findings[stem] = append(findings[stem], parts[5]+":"+parts[6])
	}
	if got := findings["template"]; len(got) != 0 {
		t.Errorf("template.yaml itself: findings %q, want none", got)
	}
	for _, m := range mutations {
		stem := strings.TrimSuffix(m.file, ".yaml")
		found := false
		for _, f := range findings[stem] {
			if strings.HasPrefix(f, m.rule+":") && strings.Contains(f, m.mentioned) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s (%q -> %q): no %s finding naming %s; findings: %q\nstderr:\n%s",
				m.file, strings.TrimSpace(m.from), strings.TrimSpace(m.to), m.rule, m.mentioned, findings[stem], &stderr)
		}
	}
}
