package record

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A run's name is a name, not a pattern: "run[X]" must not read "runX".
func TestFilesTakesNamesLiterally(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"run[X]/r0.jsonl", "run[X]/b.jsonl", "run[X]/notes.txt", "runX/evil.jsonl"} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Files(filepath.Join(root, "run[X]"))
	want := []string{filepath.Join(root, "run[X]/b.jsonl"), filepath.Join(root, "run[X]/r0.jsonl")}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Files = %v, %v; want %v", got, err, want)
	}
	if got, err := Files(filepath.Join(root, "none")); err != nil || got != nil {
		t.Errorf("a missing directory: %v, %v; want none", got, err)
	}
}
