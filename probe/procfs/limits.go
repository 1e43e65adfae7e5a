package procfs

import (
	"errors"
	"fmt"
)

// ErrUnsafeFile is wrapped by OpenFile's errors for a file it refuses: not a
// regular file, a symbolic link, too large, or owned by someone else.
var ErrUnsafeFile = errors.New("refused")

// AnyOwner, as FileLimits.Owner, accepts a file whoever owns it.
const AnyOwner = -1

// Size caps of the files leakscope opens on a target's behalf.
const (
	// MaxObjectSize bounds an ELF object or separate debug file: the
	// largest binaries with full DWARF are a few GiB.
	MaxObjectSize = 16 << 30
	// MaxPerfMapSize bounds a JVM's perf map: a full 240 MiB code cache
	// lists ~200k blobs at ~150 bytes a line, 30 MiB.
	MaxPerfMapSize = 64 << 20
)

// FileLimits say which files OpenFile accepts.
type FileLimits struct {
	// MaxSize is the largest size accepted, in bytes; 0 accepts any.
	MaxSize int64
	// Owner is the uid that must own the file (root's files are
	// accepted too), or AnyOwner.
	Owner int
	// FollowLink follows a symbolic link in the last component too.
	FollowLink bool
}

// ObjectLimits accept an ELF object or debug file: any owner, up to
// MaxObjectSize. A final symbolic link is followed: objects are also named
// by a DT_NEEDED entry or by the user (libz.so.1, /usr/bin/java), and what
// could be reached through one is checked as any file is: the file itself
// must be regular and within the cap.
var ObjectLimits = FileLimits{MaxSize: MaxObjectSize, Owner: AnyOwner, FollowLink: true}

// sizeText is n bytes in MiB when that is exact.
func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
