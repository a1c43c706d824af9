package engine_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering: the engine knows no wire, no HTTP server and no HTTP error
// mapping, and no wire imports the server (each wire is one package the
// server mounts).
func TestLayering(t *testing.T) {
	const mod = "github.com/stackbone/stackbone/internal/"
	for _, c := range []struct {
		pkg    string
		banned []string
	}{
		{mod + "engine", []string{mod + "wire", mod + "server", mod + "apierror"}},
		{mod + "wire/...", []string{mod + "server"}},
	} {
		out, err := exec.Command("go", "list", "-deps", c.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", c.pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range c.banned {
				if dep == b || strings.HasPrefix(dep, b+"/") {
					t.Errorf("%s depends on %s", c.pkg, dep)
				}
			}
		}
	}
}
