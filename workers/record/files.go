package record

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Files lists a run's records directory's *.jsonl files, sorted by name;
// none when the directory does not exist. The directory's name is never
// a pattern: a run called "run[1]" is a name, not a glob.
func Files(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range es {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".jsonl") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return files, nil
}
