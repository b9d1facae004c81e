// Package netns creates, enters and removes named network namespaces the way
// iproute2 does (a bind mount under /run/netns), so that `ip netns exec`
// works on every node of a lab. Code that must run inside a namespace runs
// on a fresh goroutine locked to its OS thread; if the thread cannot be
// switched back, it stays locked and dies with its goroutine (the pattern of
// CNI's pkg/ns and cilium/ebpf's test utilities).
package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/ocsemu/ocsemu/dataplane/nlsafe"
)

// RunDir is where named namespaces are bind-mounted, as with `ip netns`.
const RunDir = "/run/netns"

// ErrNotFound is returned when a named namespace does not exist.
var ErrNotFound = errors.New("network namespace not found")

var runDirOnce sync.Once
var runDirErr error

// prepareRunDir makes /run/netns a shared mount point, as `ip netns add`
// does, so that namespace mounts propagate to other mount namespaces.
func prepareRunDir() error {
	runDirOnce.Do(func() {
		if err := os.MkdirAll(RunDir, 0o755); err != nil {
			runDirErr = fmt.Errorf("create %s: %w", RunDir, err)
			return
		}
		err := unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		if err == unix.EINVAL { // not a mount point yet
			if err = unix.Mount(RunDir, RunDir, "none", unix.MS_BIND|unix.MS_REC, ""); err == nil {
				err = unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, "")
			}
		}
		if err != nil {
			runDirErr = fmt.Errorf("make %s a shared mount: %w", RunDir, err)
		}
	})
	return runDirErr
}

// Path is the bind-mount path of a named namespace.
func Path(name string) string { return filepath.Join(RunDir, name) }

// ErrBadName is wrapped when a namespace name is no plain file name.
var ErrBadName = errors.New("not a namespace name: want a plain name, no '/'")

// checkName refuses a name that is not a plain file name under RunDir:
// "../../proc/1/ns/net" would open any namespace file.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 255 || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("netns %q: %w", name, ErrBadName)
	}
	return nil
}

// Create makes a new named network namespace and runs setup inside it
// before returning (for sysctls and other per-namespace settings). On any
// error the namespace is removed again.
func Create(name string, setup func() error) (err error) {
	return create(name, "", setup)
}

// NewAnchor makes a plain file in RunDir for CreateLinked. Remove it with
// Delete once the namespaces linked to it are made; they keep its inode.
func NewAnchor(name string) error {
	if err := prepareRunDir(); err != nil {
		return err
	}
	f, err := os.OpenFile(Path(name), os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("create netns anchor %q: %w", name, err)
	}
	return f.Close()
}

// CreateLinked is Create with the namespace's mount point made as a hard
// link of the anchor file (NewAnchor) rather than a new file. A mount
// point is a name, not an inode, so any number of namespaces can be
// mounted on names of one inode. On a disk-backed /run (ext4) a new inode
// per namespace costs an inode-bitmap scan that grows with the inodes
// freed in the last seconds: a quarter of the CPU of creating 4,000
// namespaces right after others were removed.
func CreateLinked(name, anchor string, setup func() error) error {
	return create(name, anchor, setup)
}

func create(name, anchor string, setup func() error) (err error) {
	if err := checkName(name); err != nil {
		return err
	}
	if anchor != "" {
		if err := checkName(anchor); err != nil {
			return err
		}
	}
	if err := prepareRunDir(); err != nil {
		return err
	}
	p := Path(name)
	if anchor != "" {
		err = os.Link(Path(anchor), p)
	} else {
		var f *os.File
		if f, err = os.OpenFile(p, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444); err == nil {
			f.Close()
		}
	}
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create netns %q: already exists", name)
		}
		return fmt.Errorf("create netns %q: %w", name, err)
	}
	defer func() {
		if err != nil {
			_ = Delete(name)
		}
	}()

	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: if anything below fails half-way the thread
		// may be in the wrong namespace, so it must die with the goroutine.
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open current netns: %w", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare netns %q: %w", name, err)
			return
		}
		err = unix.Mount("/proc/thread-self/ns/net", p, "none", unix.MS_BIND, "")
		if err != nil {
			err = fmt.Errorf("bind-mount netns %q: %w", name, err)
		} else if setup != nil {
			if serr := setup(); serr != nil {
				err = fmt.Errorf("set up netns %q: %w", name, serr)
			}
		}
		if rerr := unix.Setns(orig, unix.CLONE_NEWNET); rerr != nil {
			errc <- errors.Join(err, fmt.Errorf("restore netns: %w", rerr))
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// Delete unmounts and removes a named namespace. A namespace that does not
// exist counts as deleted. The kernel frees the namespace, and the links
// inside it, once no process holds it.
func Delete(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	p := Path(name)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("unmount netns %q: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %q: %w", name, err)
	}
	return nil
}

// Exists reports whether a named namespace is mounted.
func Exists(name string) bool {
	if checkName(name) != nil {
		return false
	}
	var st unix.Statfs_t
	if err := unix.Statfs(Path(name), &st); err != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC
}

// List returns the named namespaces whose name starts with prefix, sorted.
func List(prefix string) ([]string, error) {
	entries, err := os.ReadDir(RunDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", RunDir, err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Open returns a file descriptor of the named namespace. The caller closes it.
func Open(name string) (int, error) {
	if err := checkName(name); err != nil {
		return -1, err
	}
	fd, err := unix.Open(Path(name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return -1, fmt.Errorf("open netns %q: %w", name, ErrNotFound)
		}
		return -1, fmt.Errorf("open netns %q: %w", name, err)
	}
	return fd, nil
}

// Handle opens a netlink handle working in the named namespace. The
// caller closes it.
func Handle(name string) (*netlink.Handle, error) {
	fd, err := Open(name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	h, err := netlink.NewHandleAt(vnetns.NsHandle(fd))
	if err != nil {
		return nil, fmt.Errorf("netlink handle in %s: %w", name, err)
	}
	return h, nil
}

// Inode identifies a namespace; processes inside it show the same inode
// on /proc/<pid>/ns/net.
func Inode(name string) (uint64, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	var st unix.Stat_t
	if err := unix.Stat(Path(name), &st); err != nil {
		return 0, fmt.Errorf("stat netns %q: %w", name, err)
	}
	return st.Ino, nil
}

// InNamespace says whether this process runs in the named namespace
// (the one it started in: emu's commands enter others on locked threads
// only).
func InNamespace(name string) (bool, error) {
	want, err := Inode(name)
	if err != nil {
		return false, err
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return false, fmt.Errorf("stat own netns: %w", err)
	}
	return st.Ino == want, nil
}

// Do runs fn on a goroutine whose OS thread has entered the named
// namespace. Sockets fn creates belong to that namespace and may be used
// from any goroutine afterwards.
func Do(name string, fn func() error) error {
	fd, err := Open(name)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return DoFd(fd, fn)
}

// DoFd is Do for an already open namespace file descriptor.
func DoFd(fd int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open current netns: %w", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter netns: %w", err)
			return
		}
		ferr := fn()
		if rerr := unix.Setns(orig, unix.CLONE_NEWNET); rerr != nil {
			errc <- errors.Join(ferr, fmt.Errorf("restore netns: %w", rerr))
			return // thread stays locked and is discarded
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// PIDsIn returns the processes whose network namespace has the given inode.
func PIDsIn(inodes map[uint64]bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == self {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st) != nil {
			continue
		}
		if inodes[st.Ino] {
			pids = append(pids, pid)
		}
	}
	return pids
}

// LoopbackUp brings up lo in the calling thread's namespace; pass it to
// Create, or call it from a Create setup function.
func LoopbackUp() error {
	// The loopback is ifindex 1 in every namespace (LOOPBACK_IFINDEX):
	// setting it up by index spares a lookup per namespace.
	if netlink.LinkSetUp(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: loopbackIfindex, Name: "lo"}}) == nil {
		return nil
	}
	lo, err := nlsafe.Retry1(netlink.LinkByName, "lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return nil
}

const loopbackIfindex = 1

// WriteSysctl writes a value under /proc/sys in the calling thread's
// network namespace ("net.ipv4.ip_forward" style keys). Use it inside Do
// or a Create setup function.
func WriteSysctl(key, value string) error {
	p := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}
