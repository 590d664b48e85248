// Command redisfacing lists the Redis-facing tests of the module: the Test
// and Fuzz functions that start a server through internal/testkit/redistest,
// directly or through any chain of functions of their own package. `make
// test` runs these a second time on Valkey.
//
// It prints a -run pattern matching the tests' names on its first line and
// the packages that hold them, one a line, after it:
//
//	^(TestA|TestB)$
//	./pkg/ratelimit
//	./tests
//
// The selection is read from the source, not kept in a list, so a new test
// that starts a server is picked up without anyone remembering to add it.
// It errs towards more: references are matched by name (a method is any
// function of its package with that name), so a test may be selected that
// only looks as if it could start a server; none that can is left out.
//
// Usage: redisfacing [-root DIR]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// harnessPackage is internal/testkit/redistest's path inside the module,
// and startFunc the function in it that every way of starting a server goes
// through (it finds the binary).
const (
	harnessPackage = "internal/testkit/redistest"
	startFunc      = "serverBinary"
)

func main() {
	root := flag.String("root", ".", "the module's root directory (where go.mod is)")
	flag.Parse()
	sel, err := find(*root)
	if err != nil {
		fmt.Fprintf(os.Stderr, "redisfacing: %v\n", err)
		os.Exit(1)
	}
	if len(sel.tests) == 0 {
		fmt.Fprintln(os.Stderr, "redisfacing: no test starts a server; the harness's entry point may have been renamed")
		os.Exit(1)
	}
	fmt.Println(sel.runPattern())
	for _, p := range sel.packages {
		fmt.Println(p)
	}
}

// selection is what find found: test names and the packages (as "./dir"
// patterns) that hold them, each sorted and without repeats.
type selection struct {
	tests    []string
	packages []string
}

// runPattern returns a go test -run pattern matching exactly the selected
// top-level names (and so all their subtests).
func (s selection) runPattern() string {
	return "^(" + strings.Join(s.tests, "|") + ")$"
}

// funcKey names a function, method or package-level variable by its
// package's import path and its name.
type funcKey struct{ pkg, name string }

// graph records, for each function, the functions whose bodies refer to it.
type graph struct {
	referrers map[funcKey][]funcKey
	tests     []testFunc
}

type testFunc struct {
	key funcKey
	dir string // relative to the module root, slash-separated
}

// find parses every package under root and selects the tests from which
// internal/testkit/redistest's startFunc can be reached.
func find(root string) (selection, error) {
	module, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return selection{}, err
	}
	g := graph{referrers: map[funcKey][]funcKey{}}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != root && (name == "testdata" || name == "vendor" ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if p != root {
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		return g.addPackage(p, rel, path.Join(module, rel))
	})
	if err != nil {
		return selection{}, err
	}
	reached := g.reachableFrom(funcKey{path.Join(module, harnessPackage), startFunc})
	var sel selection
	for _, tf := range g.tests {
		if reached[tf.key] {
			sel.tests = append(sel.tests, tf.key.name)
			sel.packages = append(sel.packages, "./"+tf.dir)
		}
	}
	slices.Sort(sel.tests)
	sel.tests = slices.Compact(sel.tests)
	slices.Sort(sel.packages)
	sel.packages = slices.Compact(sel.packages)
	return sel, nil
}

// modulePath reads the module line of a go.mod file.
func modulePath(goMod string) (string, error) {
	f, err := os.Open(goMod)
	if err != nil {
		return "", fmt.Errorf("read module path: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			if p, err := strconv.Unquote(strings.TrimSpace(rest)); err == nil {
				return p, nil
			}
			return strings.TrimSpace(rest), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", goMod, err)
	}
	return "", fmt.Errorf("%s has no module line", goMod)
}

// addPackage parses the Go files in dir (package importPath, at rel under
// the root; its external _test package counts as the same package) and adds
// their functions' references to g.
func (g *graph) addPackage(dir, rel, importPath string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		file := filepath.Join(dir, e.Name())
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", file, err)
		}
		isTestFile := strings.HasSuffix(e.Name(), "_test.go")
		imports := importNames(f)
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				key := funcKey{importPath, decl.Name.Name}
				if decl.Body != nil {
					g.addRefs(key, importPath, imports, decl.Body)
				}
				if isTestFile && decl.Recv == nil && isTestName(decl.Name.Name) {
					g.tests = append(g.tests, testFunc{key: key, dir: rel})
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					vs, ok := spec.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for _, name := range vs.Names {
						for _, v := range vs.Values {
							g.addRefs(funcKey{importPath, name.Name}, importPath, imports, v)
						}
					}
				}
			}
		}
	}
	return nil
}

// importNames maps the names a file uses for its imports to their paths.
// Blank and dot imports are left out: they name nothing a selector can use.
func importNames(f *ast.File) map[string]string {
	names := map[string]string{}
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name == "_" || name == "." {
			continue
		}
		names[name] = p
	}
	return names
}

// addRefs records that from refers to every name in node: pkg.Name for
// a selector on an imported package, otherwise the name in its own package.
func (g *graph) addRefs(from funcKey, pkg string, imports map[string]string, node ast.Node) {
	ast.Inspect(node, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok {
				if p, ok := imports[x.Name]; ok {
					g.addRef(from, funcKey{p, n.Sel.Name})
					return false
				}
			}
			g.addRef(from, funcKey{pkg, n.Sel.Name})
		case *ast.Ident:
			g.addRef(from, funcKey{pkg, n.Name})
		}
		return true
	})
}

func (g *graph) addRef(from, to funcKey) {
	g.referrers[to] = append(g.referrers[to], from)
}

// reachableFrom returns every function from which target can be reached
// through references, target included.
func (g *graph) reachableFrom(target funcKey) map[funcKey]bool {
	reached := map[funcKey]bool{target: true}
	queue := []funcKey{target}
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		for _, r := range g.referrers[k] {
			if !reached[r] {
				reached[r] = true
				queue = append(queue, r)
			}
		}
	}
	return reached
}

// isTestName reports whether name is a test or fuzz target go test runs:
// TestXxx or FuzzXxx, where Xxx does not start with a lower-case letter.
// TestMain is not a test.
func isTestName(name string) bool {
	if name == "TestMain" {
		return false
	}
	for _, prefix := range []string{"Test", "Fuzz"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			return rest == "" || !(rest[0] >= 'a' && rest[0] <= 'z')
		}
	}
	return false
}
