package binding_test

import (
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/focus-go/focus-go/capi/binding"
	"github.com/focus-go/focus-go/core/collect"
	"github.com/focus-go/focus-go/core/export"
	"github.com/focus-go/focus-go/core/session"
)

var update = flag.Bool("update", false, "rewrite testdata/schema.json from the code")

const golden = "testdata/schema.json"

// TestSchemaGolden pins the published schema: any change to an input, a field, a default,
// a rule or a record key shows here (go test ./capi/binding -update rewrites the file).
func TestSchemaGolden(t *testing.T) {
	got := binding.SchemaJSON()
	if *update {
		require.NoError(t, os.WriteFile(golden, got, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run go test ./capi/binding -update to write it")
	assert.Equal(t, string(want), string(got), "the schema changed: review the difference, then go test ./capi/binding -update")
}

func TestSchemaReadsItsSources(t *testing.T) {
	s := binding.Build()
	assert.Equal(t, export.ActorKeys, s.Records.Actor)
	assert.Equal(t, export.CriticKeys, s.Records.Critic)
	assert.Equal(t, export.PathKeys, append(slices.Clone(s.Records.Actor), s.Records.PathExtra...))
	assert.Equal(t, binding.Kinds, s.Rules.Kinds)
	assert.Equal(t, binding.DefaultValues(), s.Rules.Defaults)

	// Every input's type and every field's object type is described.
	names := map[string]bool{}
	for _, in := range s.Inputs {
		assert.False(t, names[in.Name], "input %q twice", in.Name)
		names[in.Name] = true
		assert.NotEmpty(t, in.Functions, in.Name)
	}
	for name, ty := range s.Types {
		assert.NotEmpty(t, ty.Fields, name)
		for _, f := range ty.Fields {
			base := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(f.Type, "list of "), "map of "), " or null")
			if strings.Contains(base, ".") {
				assert.Contains(t, s.Types, base, "%s.%s", name, f.Name)
			}
		}
	}
}

// TestSpecKeysAreSessionSpecs: the collection spec's keys are collect.Config's JSON keys
// and, beside them, one per part of session.Spec.
func TestSpecKeysAreSessionSpecs(t *testing.T) {
	var want []string
	config := reflect.TypeFor[collect.Config]()
	for i := range config.NumField() {
		name, _, _ := strings.Cut(config.Field(i).Tag.Get("json"), ",")
		if name != "-" {
			want = append(want, name)
		}
	}
	spec := reflect.TypeFor[session.Spec]()
	for i := range spec.NumField() {
		if f := spec.Field(i); f.Type != config {
			want = append(want, strings.ToLower(f.Name))
		}
	}
	var got []string
	for _, f := range binding.Build().Types["session.Spec"].Fields {
		got = append(got, f.Name)
	}
	assert.ElementsMatch(t, want, got)
}

// unpublished are the inputs capi decodes strictly but the schema leaves out (Inputs).
var unpublished = map[string]bool{"simulated server config": true, "faults": true}

// TestCapiDecodesEveryInputThroughTheSchema reads capi's sources: every decodeJSON call
// names an input of the schema (or an unpublished one), an export that decodes an input
// itself is among the input's functions, and every published input is decoded somewhere.
func TestCapiDecodesEveryInputThroughTheSchema(t *testing.T) {
	published := map[string]binding.Input{}
	for _, in := range binding.Inputs {
		published[in.Name] = in
	}
	files, err := filepath.Glob("../*.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	fset := token.NewFileSet()
	exports := map[string]bool{}
	decoded := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			export := false
			if fn.Doc != nil {
				for _, c := range fn.Doc.List {
					export = export || c.Text == "//export "+fn.Name.Name
				}
			}
			if export {
				exports[fn.Name.Name] = true
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) != 4 {
					return true
				}
				if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "decodeJSON" {
					return true
				}
				lit, ok := call.Args[2].(*ast.BasicLit)
				if !assert.True(t, ok && lit.Kind == token.STRING, "%s: decodeJSON's name must be a string literal", fset.Position(call.Pos())) {
					return true
				}
				name, _ := strconv.Unquote(lit.Value)
				decoded[name] = true
				in, ok := published[name]
				if !ok {
					assert.True(t, unpublished[name], "%s: %s decodes %q, which the schema does not publish", fset.Position(call.Pos()), fn.Name.Name, name)
					return true
				}
				if export {
					assert.Contains(t, in.Functions, fn.Name.Name, "%s: the schema does not list %s as reading %q", fset.Position(call.Pos()), fn.Name.Name, name)
				}
				return true
			})
		}
	}
	for _, in := range binding.Inputs {
		assert.True(t, decoded[in.Name], "no export decodes %q", in.Name)
		for _, fn := range in.Functions {
			assert.True(t, exports[fn], "%q lists %s, which capi does not export", in.Name, fn)
		}
	}
}

func TestSchemaJSONIsValid(t *testing.T) {
	var s map[string]any
	require.NoError(t, json.Unmarshal(binding.SchemaJSON(), &s))
	assert.ElementsMatch(t, []string{"inputs", "types", "rules", "records"}, keys(s))
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
