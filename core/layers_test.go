package core

import (
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
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

// listPackages runs `go list -json` on the whole module from its root.
func listPackages(t *testing.T, args ...string) []goPackage {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the layer check needs the go command on PATH: %v", err)
	}
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = filepath.Dir(filepath.Dir(file))
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

func TestLayer(t *testing.T) {
	assert.Equal(t, "core", layer(module+"core/collect"))
	assert.Equal(t, "sim", layer(module+"sim"))
	assert.Equal(t, "", layer("github.com/valyala/fasthttp"))
}
