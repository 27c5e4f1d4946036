package sqlitestore

import (
	"os"
	"path/filepath"
	"runtime"
)

// UserDataPath returns where a program named app keeps its database file
// named file by default, creating the folder (0700: the conversations in
// it are the user's only). The folder is app in $XDG_DATA_HOME when that
// is set, else in the system's per-user data folder: ~/.local/share on
// Linux and the BSDs, the application support folder on macOS, %AppData%
// on Windows.
//
//	path, err := sqlitestore.UserDataPath("my-agent", "chats.db")
//	...
//	st, err := sqlitestore.Open(ctx, path)
func UserDataPath(app, file string) (string, error) {
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
	return filepath.Join(dir, file), nil
}
