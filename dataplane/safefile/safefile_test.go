package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Write refuses anything but a regular file at its destination: a link is
// neither followed nor replaced, a device or a pipe is left alone.
func TestWriteRefusesWhatIsNoRegularFile(t *testing.T) {
	dir := t.TempDir()
	victim, link := filepath.Join(dir, "victim"), filepath.Join(dir, "report.html")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "null")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{link, "is a symbolic link: emu does not write through one, nor over it"},
		{fifo, "is not a regular file (a named pipe)"},
		{"/dev/null", "is not a regular file (a character device)"},
	} {
		if err := Write(tt.path, []byte("<html>"), 0o644); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Write(%s): %v, want %q", tt.path, err, tt.want)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the link's target now holds %q", b)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", fi.Mode(), err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the pipe was replaced: %v, %v", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A regular file is replaced whole, with the mode asked for.
func TestWriteReplacesAFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "report.html")
	os.WriteFile(p, []byte("old, longer content"), 0o600)
	if err := Write(p, []byte("<html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(p)
	if b, _ := os.ReadFile(p); err != nil || string(b) != "<html>" || fi.Mode().Perm() != 0o644 {
		t.Errorf("report.html: %q, mode %v, %v", b, fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestWriteOntoADirectoryFails(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(dir, "d"), []byte("x"), 0o644); err == nil {
		t.Error("writing over a directory succeeded")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left after a failed write: %v", left)
	}
}

func TestCreateRefusesALink(t *testing.T) {
	dir := t.TempDir()
	victim, link := filepath.Join(dir, "victim"), filepath.Join(dir, "out.csv")
	os.WriteFile(victim, []byte("keep"), 0o600)
	os.Symlink(victim, link)
	if f, err := Create(link); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		if f != nil {
			f.Close()
		}
		t.Errorf("Create through a link: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the link's target now holds %q", b)
	}
	f, err := Create(filepath.Join(dir, "new.csv"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "s.yaml")
	os.WriteFile(small, []byte("name: s\n"), 0o644)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.yaml")
	os.Symlink(small, link)
	tests := []struct {
		name, path string
		max        int64
		want       string // "" reads
	}{
		{"a regular file", small, 100, ""},
		{"a link to one", link, 100, ""},
		{"at the limit", small, 8, ""},
		{"over the limit", small, 7, "file too large: 8 bytes, the most emu reads is 7"},
		{"a named pipe", fifo, 100, "is not a regular file (a named pipe)"},
		{"a directory", dir, 100, "is not a regular file (a directory)"},
		{"a character device", "/dev/zero", 100, "is not a regular file (a character device)"},
		{"missing", filepath.Join(dir, "none"), 100, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Read(tt.path, tt.max)
			switch {
			case tt.want == "" && (err != nil || string(b) != "name: s\n"):
				t.Errorf("Read = %q, %v", b, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Read: %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := ReadNoLink(link, 100); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("ReadNoLink through a link: %v", err)
	}
	if b, err := ReadNoLink(small, 100); err != nil || string(b) != "name: s\n" {
		t.Errorf("ReadNoLink = %q, %v", b, err)
	}
	if _, err := ReadNoLink(fifo, 100); err == nil || !strings.Contains(err.Error(), "a named pipe") {
		t.Errorf("ReadNoLink of a named pipe: %v", err)
	}
	if _, err := Read(small, 7); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: %v, want ErrTooLarge", err)
	}
}
