package procgroup

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// cgroups is where this process makes its commands' cgroups: in its own
// cgroup v2.
var cgroups struct {
	once   sync.Once
	parent string // this process's cgroup v2 directory; "" when it has none usable

	// probed is set once a guard was started into parent with
	// CLONE_INTO_CGROUP, which shows that a command can be started into
	// a cgroup of parent: the kernel has clone3 and CLONE_INTO_CGROUP
	// (Linux 5.7), no seccomp filter refuses it, and this process may
	// move processes within parent.
	probed atomic.Bool
	// off is set when cgroups cannot be used here after all.
	off atomic.Bool
	seq atomic.Uint64
}

// freezeOnly makes Group.Kill and the guard kill a cgroup as they do on a
// kernel without cgroup.kill (before Linux 5.14): tests set it.
var freezeOnly bool

// cgroupWait bounds how long Group.Kill waits for the processes of a
// cgroup to be gone, so as to remove it.
const cgroupWait = 5 * time.Second

// cgroupParent returns the directory under which this process makes its
// commands' cgroups, its own cgroup v2; "" when it has none in which it
// may make cgroups and move processes.
func cgroupParent() string {
	cgroups.once.Do(func() {
		cgroups.parent = ownCgroup()
	})
	if cgroups.off.Load() {
		return ""
	}
	return cgroups.parent
}

// ownCgroup finds this process's cgroup v2 directory, from
// /proc/self/cgroup and the cgroup2 mount in /proc/self/mountinfo, and
// checks that processes can be put in cgroups made in it.
func ownCgroup() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	path, ok := "", false
	for l := range strings.SplitSeq(string(b), "\n") {
		if p, found := strings.CutPrefix(l, "0::"); found {
			path, ok = p, true
		}
	}
	// A path with ".." is outside this process's cgroup namespace: there
	// is no directory for it.
	if !ok || !strings.HasPrefix(path, "/") || strings.Contains(path, "/..") {
		return ""
	}
	m, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	dir := cgroup2Dir(m, path)
	if dir == "" {
		return ""
	}
	// A cgroup's children can hold processes only when it is a domain
	// (the root has no cgroup.type): not in a threaded subtree.
	if t, err := os.ReadFile(filepath.Join(dir, "cgroup.type")); err == nil && string(bytes.TrimSpace(t)) != "domain" {
		return ""
	}
	// Starting a process into a child cgroup needs write access to
	// cgroup.procs of the common ancestor, this one; making the child
	// needs write access to the directory. (A systemd unit grants both
	// to a user with Delegate=yes.)
	if syscall.Access(dir, wOK) != nil || syscall.Access(filepath.Join(dir, "cgroup.procs"), wOK) != nil {
		return ""
	}
	return dir
}

// wOK is access(2)'s W_OK.
const wOK = 2

// cgroup2Dir returns the directory of the cgroup v2 at path (as
// /proc/self/cgroup gives it) under a cgroup2 mount listed in mountinfo;
// "" when no mount shows it.
func cgroup2Dir(mountinfo []byte, path string) string {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional fields] - type source super-options
		f := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(f) || f[sep+1] != "cgroup2" {
			continue
		}
		root, point := unescapeMount(f[3]), unescapeMount(f[4])
		rel, ok := strings.CutPrefix(path, root)
		if root == "/" {
			rel, ok = path, true
		}
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
			continue // this mount shows another part of the tree
		}
		return filepath.Join(point, rel)
	}
	return ""
}

// unescapeMount undoes the octal escapes of a mountinfo field (\040 for
// a space, \011, \012, \134).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// newCgroupPath returns the path of a new cgroup for a command, not yet
// made; "" when there can be none.
func newCgroupPath() string {
	parent := cgroupParent()
	if parent == "" {
		return ""
	}
	return parent + "/planround-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(cgroups.seq.Add(1), 10)
}

// makeCgroup makes the cgroup dir and returns a descriptor of it for
// [syscall.SysProcAttr.CgroupFD]. When it cannot, and no cgroup can be
// made here, it turns cgroups off.
func makeCgroup(dir string) (fd int, err error) {
	if err := syscall.Mkdir(dir, 0o755); err != nil {
		switch err {
		case syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENOENT, syscall.ENOTDIR:
			cgroups.off.Store(true)
		}
		return -1, err
	}
	fd, err = syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		_ = syscall.Rmdir(dir)
		return -1, err
	}
	return fd, nil
}

// openCgroupParent returns a descriptor of the parent directory, for the
// probe.
func openCgroupParent() (int, error) {
	return syscall.Open(cgroups.parent, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
}

// killCgroup kills every process of the cgroup tree at dir, whatever
// their session or process group, with cgroup.kill (Linux 5.14). It
// reports false when the kernel has no cgroup.kill: then it froze the
// tree, and [removeCgroup] kills its processes one by one.
func killCgroup(dir string) (killed bool) {
	if !freezeOnly {
		err := writeCgroupFile(dir, "cgroup.kill", '1')
		if err == nil || !errors.Is(err, os.ErrNotExist) {
			return true
		}
	}
	// Frozen, the processes cannot fork while they are killed one by one,
	// and SIGKILL ends a frozen process.
	_ = writeCgroupFile(dir, "cgroup.freeze", '1')
	return false
}

// writeCgroupFile writes c to the file name of dir.
func writeCgroupFile(dir, name string, c byte) error {
	fd, err := syscall.Open(dir+"/"+name, syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir + "/" + name, Err: err}
	}
	defer syscall.Close(fd)
	if _, err := syscall.Write(fd, []byte{c}); err != nil {
		return &os.PathError{Op: "write", Path: dir + "/" + name, Err: err}
	}
	return nil
}

// removeCgroup waits until the processes of the cgroup tree at dir, which
// killCgroup killed, are gone, and removes the tree. Unless killed, it
// sends SIGKILL to each process it finds there. It gives up after
// cgroupWait, leaving the cgroup (thawed).
func removeCgroup(dir string, killed bool) error {
	deadline := time.Now().Add(cgroupWait)
	delay := 50 * time.Microsecond
	for {
		if !killed {
			killEach(dir)
		}
		err := removeTree(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			if !killed {
				_ = writeCgroupFile(dir, "cgroup.freeze", '0') // not left frozen
			}
			return err
		}
		time.Sleep(delay)
		delay = min(2*delay, 10*time.Millisecond)
	}
}

// removeTree removes the cgroup at dir and those below it, which the
// command may have made.
func removeTree(dir string) error {
	err := syscall.Rmdir(dir)
	if err != syscall.EBUSY {
		if err != nil {
			return &os.PathError{Op: "rmdir", Path: dir, Err: err}
		}
		return nil
	}
	// Busy: processes remain, or cgroups below.
	for _, sub := range subCgroups(dir) {
		_ = removeTree(sub)
	}
	if err := syscall.Rmdir(dir); err != nil {
		return &os.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	return nil
}

// subCgroups returns the cgroups right below dir.
func subCgroups(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var subs []string
	for _, e := range ents {
		if e.IsDir() {
			subs = append(subs, filepath.Join(dir, e.Name()))
		}
	}
	return subs
}

// killEach sends SIGKILL to each process of the cgroup tree at dir.
func killEach(dir string) {
	if b, err := os.ReadFile(dir + "/cgroup.procs"); err == nil {
		for f := range strings.FieldsSeq(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	for _, sub := range subCgroups(dir) {
		killEach(sub)
	}
}
