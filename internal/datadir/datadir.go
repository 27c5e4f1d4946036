// Package datadir finds the folder where an example keeps its data by
// default.
package datadir

import (
	"os"
	"path/filepath"
	"runtime"
)

// Dir returns the folder app keeps its data in, creating it (0700: the
// conversations in it are the user's only): app in $XDG_DATA_HOME when it
// is set, else in the system's per-user data folder (~/.local/share on
// Linux and the BSDs, the application support folder on macOS, %AppData%
// on Windows).
func Dir(app string) (string, error) {
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		switch runtime.GOOS {
		case "darwin", "windows", "ios", "plan9":
			dir, err := os.UserConfigDir()
			if err != nil {
				return "", err
			}
			base = dir
		default:
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			base = filepath.Join(home, ".local", "share")
		}
	}
	dir := filepath.Join(base, app)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}
