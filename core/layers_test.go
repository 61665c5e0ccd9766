package core

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/focus-go/focus-go/"

// layer names the top folder of a module package ("core", "backends", "sim", "capi",
// "benchmarks", ...).
func layer(importPath string) string {
	rest, ok := strings.CutPrefix(importPath, module)
	if !ok {
		return ""
	}
	top, _, _ := strings.Cut(rest, "/")
	return top
}

// allowed lists, per layer, the module layers its (non-test) code may import.
var allowed = map[string][]string{
	"core":     {"core"},
	"backends": {"core", "backends"},
	"sim":      {"core", "backends", "sim"},
}

type goPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// root is the module's root folder.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// listPackages runs `go list -json` on the whole module from its root.
func listPackages(t *testing.T, args ...string) []goPackage {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the layer check needs the go command on PATH: %v", err)
	}
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = root()
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
	}
	require.NoError(t, err)
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

// TestCoreDependsOnNothingAbove is the layering rule of issue #16:
// `go list -deps ./core/...` lists no package outside core/ from this module.
func TestCoreDependsOnNothingAbove(t *testing.T) {
	for _, p := range listPackages(t, "-deps", "./core/...") {
		if l := layer(p.ImportPath); l != "" {
			assert.Equal(t, "core", l, "go list -deps ./core/... lists %s; core/ must import nothing of the module outside core/", p.ImportPath)
		}
	}
}

// TestImportsPointDown checks every module package's own imports against the layer
// order: capi and sim may use backends and core, backends uses core, core neither.
func TestImportsPointDown(t *testing.T) {
	for _, p := range listPackages(t, "./...") {
		ok, ruled := allowed[layer(p.ImportPath)]
		if !ruled {
			continue
		}
		for _, imp := range p.Imports {
			l := layer(imp)
			if l == "" {
				continue
			}
			assert.Contains(t, ok, l, "%s imports %s: layer %s may import only %v", p.ImportPath, imp, layer(p.ImportPath), ok)
		}
	}
}

// TestFoldersAreFloors keeps a nested folder on its parent's floor: a package inside
// another package's folder (core/tree/treetest inside core/tree) imports nothing from
// outside that folder that itself depends on the parent. A package that needs what is
// built on top of its parent (core/session runs core/collect with core/bridge's remote
// parts) is the parent's sibling, not its child.
func TestFoldersAreFloors(t *testing.T) {
	pkgs := listPackages(t, "./...")
	deps := map[string]map[string]bool{}
	for _, p := range pkgs {
		deps[p.ImportPath] = map[string]bool{}
		for _, d := range p.Deps {
			deps[p.ImportPath][d] = true
		}
	}
	for _, p := range pkgs {
		for parent := path.Dir(p.ImportPath); strings.HasPrefix(parent, module); parent = path.Dir(parent) {
			if _, ok := deps[parent]; !ok {
				continue // a folder without a package of its own
			}
			for _, imp := range p.Imports {
				inside := imp == parent || strings.HasPrefix(imp, parent+"/")
				assert.False(t, !inside && deps[imp][parent], "%s imports %s, which depends on %s: "+
					"a package in %s's folder stays on its floor; move it beside %s", p.ImportPath, imp, parent, parent, parent)
			}
		}
	}
}

// integrationTests are the only core/ test files that may import the layers above:
// they run the engine against a real dialect or the simulated server over HTTP.
var integrationTests = map[string]bool{
	"core/collect/turn_test.go":       true, // whole turns read by backends/parse's Hermes and harmony parsers
	"core/collect/sim_fault_test.go":  true, // the engine against sim/ through backends/sglang, with faults
	"core/collect/abort_http_test.go": true, // stop_on_abort cancelling backends/sglang's requests over HTTP
	"core/fleet/sim_http_test.go":     true, // collections routed over replicas of sim/ through backends/sglang
}

// TestCoreTestsImportCore keeps core's own tests (and examples, which are documentation)
// on core's vocabulary: only the integration tests listed above reach outside core/.
func TestCoreTestsImportCore(t *testing.T) {
	base := root()
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(base, "core"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(base, path)
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			if l := layer(imp); l != "" && l != "core" {
				assert.True(t, integrationTests[filepath.ToSlash(rel)], "%s imports %s: core tests use core's vocabulary (or join the listed integration tests)", rel, imp)
			}
		}
		return nil
	})
	require.NoError(t, err)
}

func TestLayer(t *testing.T) {
	assert.Equal(t, "core", layer(module+"core/collect"))
	assert.Equal(t, "sim", layer(module+"sim"))
	assert.Equal(t, "", layer("github.com/valyala/fasthttp"))
}
