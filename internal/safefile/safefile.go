// Package safefile creates and replaces the files a root process writes on
// behalf of its user (reports, captures, artifact directories) without
// being turned against its host by another user.
//
// Paths are resolved one component at a time, each relative to a file
// descriptor of the directory before it, so no entry can be swapped
// between a check and its use. A symbolic link is followed only when root
// or the effective user owns it; a link owned by anyone else (a link
// planted in /tmp) is refused, and so is an existing file or directory
// another user owns, unless Options.Force is set. A regular file is never
// written in place: data goes to a new file (O_EXCL, mode 0600) in the same
// directory, renamed over the entry, so a planted hard link or a file
// another user keeps open is never written either. Existing devices and
// FIFOs (/dev/null, /dev/stdout, a pipe) are written in place, opened
// without blocking: a FIFO with no reader is an error, not a hang.
//
// That is the Linux implementation, where leakscope traces as root. The
// others (macOS, Windows: report and diff of a capture copied from the
// traced host) write the same way, a new file renamed over the entry, but
// check no ownership: they run as the user who reads the capture.
package safefile

import "errors"

// Options say how far the caller trusts other users' entries.
type Options struct {
	// Force follows symbolic links and replaces files and directories
	// that other users own.
	Force bool
}

// ErrOtherUser is wrapped by the errors for an entry, a symbolic link
// or a directory that another user owns.
var ErrOtherUser = errors.New("owned by another user")
