package deployconfig

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParameterOverrides: any samconfig.toml gives overrides or an error,
// never a panic, and every override has a name.
func FuzzParameterOverrides(f *testing.F) {
	f.Add("[dev.deploy.parameters]\nparameter_overrides = \"A=1 B='x y'\"\n", "dev")
	f.Add("[dev.deploy.parameters]\nparameter_overrides = [\n \"A=1\",\n 'B=2'\n]\n", "dev")
	f.Add("[dev.global.parameters]\nparameter_overrides = \"A=\\\"unterminated\"\n", "dev")
	f.Add("[dev.deploy.parameters]\nparameter_overrides = [\"A=1\"", "dev")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body, env string) {
		path := filepath.Join(dir, "samconfig.toml")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := ParameterOverrides(path, env)
		if err != nil {
			return
		}
		for k := range out {
			if k == "" {
				t.Fatalf("empty parameter name from %q", body)
			}
		}
	})
}
