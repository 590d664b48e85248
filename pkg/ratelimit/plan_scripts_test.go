package ratelimit

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestPlanTemplatesFillIn: every plan template fills in for the shapes the
// Limiter sends, leaving no mark behind, and a mark without a value is an
// error, not a script.
func TestPlanTemplatesFillIn(t *testing.T) {
	cases := []struct {
		name string
		key  planKey
	}{
		{"two limits", planKey{n: 2, args: [2 * maxPlanLimits]string{"3", "1000000", "9", "60000000"}}},
		{"a shadow and a long limit", planKey{n: 3, args: [2 * maxPlanLimits]string{"-3", "1000000", "9", "60000000", "200000", "-86400000"}}},
		{"the most limits", planKey{n: maxPlanLimits, args: [2 * maxPlanLimits]string{"1", "1000000", "2", "2000000", "3", "3000000", "4", "4000000", "5", "5000000", "6", "6000000", "7", "7000000", "8", "8000000"}}},
		{"a tier and a sliding log", planKey{n: 1, args: [2 * maxPlanLimits]string{"600", "60000000"}, other: 2, otherLimits: 1, otherPerLimit: 2}},
		{"a tier and two token buckets", planKey{n: 2, args: [2 * maxPlanLimits]string{"3", "1000000", "9", "60000000"}, other: 3, otherLimits: 2, otherPerLimit: 3}},
	}
	for _, tc := range cases {
		src, err := planSource(tc.key)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// The templates' marks are gone (the scripts written in hold no
		// "{{"; mixed.lua's composition is checked the same way).
		if i := strings.Index(src, "{{"); i >= 0 {
			t.Fatalf("%s: a mark left in the script: %.60q", tc.name, src[i:])
		}
		for i := 1; i <= tc.key.n; i++ {
			if !strings.Contains(src, "local a"+strconv.Itoa(i)+" = ") {
				t.Fatalf("%s: no decision for limit %d", tc.name, i)
			}
		}
	}
	for _, bad := range []planKey{
		{n: 1, args: [2 * maxPlanLimits]string{"3", "1000000"}},
		{n: 2, args: [2 * maxPlanLimits]string{"3", "1000000", "x", "60000000"}},
		{n: 2, args: [2 * maxPlanLimits]string{"3", "0", "9", "60000000"}},
		{n: 1, args: [2 * maxPlanLimits]string{"3", "1000000"}, other: 9, otherLimits: 1, otherPerLimit: 2},
	} {
		if src, err := planSource(bad); err == nil {
			t.Fatalf("planSource(%+v) made a script of %d bytes, want an error", bad, len(src))
		}
	}
	if _, err := expandPlan("x = {{Missing}}", nil, map[string]string{}, nil); err == nil {
		t.Fatal("a mark without a value filled in")
	}
}

// TestPackageLinksNoTemplateEngine: pkg/ratelimit imports neither
// text/template nor html/template. A reachable template execution makes
// the Go linker keep every exported method in the binary: with
// text/template filling in the plan scripts, the authorizer's bootstrap
// went from 13.5 to 26.2 MB and its cold start with it.
func TestPackageLinksNoTemplateEngine(t *testing.T) {
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		name := f.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range file.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == "text/template" || path == "html/template" {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}
