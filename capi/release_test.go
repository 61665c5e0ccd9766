package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goList runs `go list -f format [args] .` on this package.
func goList(t *testing.T, format string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the release-build check needs the go command on PATH: %v", err)
	}
	out, err := exec.Command("go", append(append([]string{"list", "-f", format}, args...), ".")...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
	}
	require.NoError(t, err)
	return string(out)
}

// TestReleaseBuildHoldsNoTestCode: the shipped libfocus.so (`make lib`, no build tags)
// compiles neither selftest.go (the focus_selftest_* exports) nor core/tree/treetest;
// `-tags focus_selftest` (build/selftest/libfocus.so, the one the Python tests load)
// has both.
func TestReleaseBuildHoldsNoTestCode(t *testing.T) {
	release := goList(t, `{{join .GoFiles " "}} {{join .CgoFiles " "}} {{join .Deps " "}}`)
	assert.NotContains(t, release, "selftest.go")
	assert.NotContains(t, release, "/treetest")
	assert.Contains(t, release, "collect.go", "go list read the package")

	selftest := goList(t, `{{join .GoFiles " "}} {{join .CgoFiles " "}} {{join .Deps " "}}`, "-tags", "focus_selftest")
	assert.Contains(t, strings.Fields(selftest), "selftest.go")
	assert.Contains(t, selftest, "github.com/focus-go/focus-go/core/tree/treetest")
}
