//go:build unix

package store

import (
	"os"
	"syscall"
)

// linkCount is how many names (hard links) the file has, where the
// platform says.
func linkCount(fi os.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true // Nlink is uint16 on some platforms
}
