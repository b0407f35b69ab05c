package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// heldLaneFiles lists the lanes of the SQLite file at dbPath whose lock
// file (<dbPath>.lane-NAME.lock) is held now: a shared flock tried without
// waiting is refused only while an exclusive one, a lane's, is held. It
// keeps nothing: the probe is let go at once. (A lane starting in that
// instant would find its lock busy and say so; it is not taken from it.)
func heldLaneFiles(dbPath string) ([]string, error) {
	if dbPath == "" {
		return nil, nil // no file, no lock files
	}
	dir, base := filepath.Split(dbPath)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	prefix := base + ".lane-"
	var held []string
	for _, e := range entries {
		name := e.Name()
		lane, ok := strings.CutPrefix(name, prefix)
		if !ok || e.IsDir() {
			continue
		}
		if lane, ok = strings.CutSuffix(lane, ".lock"); !ok {
			continue
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			continue // gone meanwhile: nobody holds it
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		f.Close() // drops the probe, if it was granted
		if errors.Is(err, syscall.EWOULDBLOCK) {
			held = append(held, lane)
		}
	}
	return held, nil
}
