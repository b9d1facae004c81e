package reproduce

import "testing"

// Regenerating one study replaces its section only; the others and the
// sections no study writes stay as they were, in study order.
func TestSplice(t *testing.T) {
	old := "# R\n\nold header\n\n" +
		"## Paper 000 (`emu reproduce paper000`, 1 s)\n\nA0\n\n" +
		"## Paper 004 (`emu reproduce paper004`, 9 s)\n\nD0\n\n" +
		"## Runnable on namespaces\n\nmeasured\n"
	for _, tc := range []struct {
		name  string
		fresh map[string]string
		want  string
	}{
		{"one study", map[string]string{"paper004": "## Paper 004 (`emu reproduce paper004`, 2 s)\n\nD1\n\n"},
			"# R\n\nnew\n\n## Paper 000 (`emu reproduce paper000`, 1 s)\n\nA0\n\n## Paper 004 (`emu reproduce paper004`, 2 s)\n\nD1\n\n## Runnable on namespaces\n\nmeasured\n"},
		{"a study not in the file yet", map[string]string{"paper003": "## Paper 003 (`emu reproduce paper003`, 3 s)\n\nC1\n\n"},
			"# R\n\nnew\n\n## Paper 000 (`emu reproduce paper000`, 1 s)\n\nA0\n\n## Paper 003 (`emu reproduce paper003`, 3 s)\n\nC1\n\n## Paper 004 (`emu reproduce paper004`, 9 s)\n\nD0\n\n## Runnable on namespaces\n\nmeasured\n"},
	} {
		got := Splice(old, "# R\n\nnew\n\n", []string{"paper000", "paper001", "paper003", "paper004"}, tc.fresh)
		if got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}
