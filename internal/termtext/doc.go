// Package termtext makes untrusted strings safe to print on a terminal.
//
// leakscope runs as root and prints strings that the traced process or
// other users control: symbol names from ELF, DWARF, Go's pclntab and JVM
// method names, file and module paths, the command line, replies of a
// JVM's attach protocol, and whatever a capture file read back holds. A
// terminal interprets some characters in them: ESC starts CSI and OSC
// sequences (clear the screen, set the window title, write the clipboard
// with OSC 52, make a hyperlink with OSC 8), CR and LF move the cursor so
// a name can overwrite a line or forge a new one at column 0, and the
// bidirectional controls reorder what is displayed. Sanitize renders all
// of them visibly instead.
package termtext
