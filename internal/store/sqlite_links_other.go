//go:build !unix

package store

import "os"

// linkCount cannot tell here.
func linkCount(os.FileInfo) (uint64, bool) { return 0, false }
