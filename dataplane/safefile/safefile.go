// Package safefile writes the files emu makes and reads the files it is
// given, as root, without being led astray: a write never follows a
// symbolic link at its destination (a run directory handed over by
// someone else may hold report.html -> /etc/passwd), and a read takes
// only a regular file of bounded size (not /dev/zero, not a FIFO that
// never ends).
package safefile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Write writes data to path atomically: into a new file beside it, then
// renamed over it, so a reader never sees half a file. What is at path
// must be a regular file or nothing: a symbolic link (report.html ->
// /etc/passwd in a run directory someone handed over), a directory or a
// device (-o /dev/null) is refused, neither followed nor replaced.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link: emu does not write through one, nor over it", path)
		}
		return fmt.Errorf("%s is not a regular file (%s)", path, kind(fi.Mode()))
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	pending.Store(tmp.Name(), true)
	defer func() {
		pending.Delete(tmp.Name())
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// pending holds the temporary files of writes under way.
var pending sync.Map

// RemovePending removes the temporary files of writes under way: a
// command that exits at an interrupt calls it, so that no half-written
// ".<name>.tmp*" stays beside an output.
func RemovePending() {
	pending.Range(func(k, _ any) bool {
		os.Remove(k.(string))
		return true
	})
}

// Create creates or truncates path for writing, refusing a symbolic link
// there.
func Create(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link: emu does not write through one", path)
	}
	return f, err
}

// ErrTooLarge is wrapped when a file is larger than a read allows.
var ErrTooLarge = errors.New("file too large")

// Open opens a regular file for reading (symbolic links are followed: a
// user's own link to a scenario is fine), refusing anything else: a
// directory, a device, or a named pipe, which would otherwise wait for a
// writer forever.
func Open(path string) (*os.File, error) {
	f, _, err := openRegular(path, 0)
	return f, err
}

// OpenNoLink is Open refusing a symbolic link at path (O_NOFOLLOW).
func OpenNoLink(path string) (*os.File, error) {
	f, _, err := openRegular(path, syscall.O_NOFOLLOW)
	return f, err
}

// Read reads a regular file (Open) of at most max bytes.
func Read(path string, max int64) ([]byte, error) {
	return readRegular(path, 0, max)
}

// ReadNoLink is Read refusing a symbolic link at path: for files root
// reads from a directory someone else owns (a student's answers.yaml
// that links to /etc/shadow would otherwise be echoed in its parse
// errors).
func ReadNoLink(path string, max int64) ([]byte, error) {
	return readRegular(path, syscall.O_NOFOLLOW, max)
}

// openRegular opens path read-only with flags (O_NONBLOCK always: opening
// a FIFO would wait for a writer) and refuses what is not a regular file.
func openRegular(path string, flags int) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|flags, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, nil, fmt.Errorf("%s is a symbolic link: emu reads only the file itself here", path)
	}
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%s)", path, kind(fi.Mode()))
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// readRegular reads a regular file (openRegular) of at most max bytes.
func readRegular(path string, flags int, max int64) ([]byte, error) {
	f, fi, err := openRegular(path, flags)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, fmt.Errorf("%s: %w: %d bytes, the most emu reads is %d", path, ErrTooLarge, fi.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max { // it grew while we read
		return nil, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, max)
	}
	return data, nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
}
