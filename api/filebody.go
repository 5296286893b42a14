package api

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
)

// FileBodyOf reads the file at path into a FileBody (the CLI's and the MCP server's --file).
// A file larger than max is refused before it is read whole.
func FileBodyOf(path string, max int64) (*FileBody, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory; name a file", path)
	}
	if max > 0 && st.Size() > max {
		return nil, fmt.Errorf("%s is %d bytes; the server takes files up to %d", path, st.Size(), max)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return &FileBody{Name: filepath.Base(path), ContentBase64: base64.StdEncoding.EncodeToString(data)}, nil
}
