package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestServingRecord(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home") // made by the first write

	_, found, err := ReadServing(home)
	require.NoError(t, err)
	require.False(t, found, "no record yet")

	me := Serving{PID: os.Getpid(), URL: "http://127.0.0.1:18377", SandboxURL: "http://127.0.0.1:18378", Since: time.Now().UTC().Round(time.Second)}
	require.NoError(t, WriteServing(home, me))
	got, found, err := ReadServing(home)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, me, got)
	entries, err := os.ReadDir(home)
	require.NoError(t, err)
	require.Len(t, entries, 1, "written aside and renamed: no temporary file is left")

	// A replica on the same home overwrites it; the first one's clean stop leaves the
	// replica's record in place.
	other := me
	other.PID, other.URL = os.Getppid(), "http://127.0.0.1:18379"
	require.NoError(t, WriteServing(home, other))
	require.NoError(t, RemoveServing(home, me.PID))
	got, found, err = ReadServing(home)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, other.URL, got.URL)
	require.NoError(t, RemoveServing(home, other.PID))
	_, err = os.Stat(ServingPath(home))
	require.ErrorIs(t, err, os.ErrNotExist, "its own serve's clean stop removes it")
	require.NoError(t, RemoveServing(home, other.PID), "removing twice is fine")

	// A serve that was killed leaves its record: a reader ignores it.
	gone := me
	gone.PID = 1 << 30 // above Linux's largest process id
	require.NoError(t, WriteServing(home, gone))
	_, found, err = ReadServing(home)
	require.NoError(t, err)
	require.False(t, found)

	// A record that is not one is an error naming the file and what to do.
	for _, bad := range []string{"{half", `{"pid":0,"url":"http://127.0.0.1:1"}`, `{"pid":1,"url":"ftp://x"}`,
		`{"pid":1,"url":"http://127.0.0.1:1","sandbox_url":"nowhere"}`} {
		require.NoError(t, os.WriteFile(ServingPath(home), []byte(bad), 0o600))
		_, _, err = ReadServing(home)
		require.ErrorContains(t, err, ServingPath(home)+": not a record of a running loopx serve (delete it", bad)
	}
}

// Clients reach a wildcard listener on the loopback address.
func TestServingURLOfAWildcardListener(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1:18377": "http://127.0.0.1:18377",
		"[::]:18377":      "http://127.0.0.1:18377",
		"0.0.0.0:18377":   "http://127.0.0.1:18377",
		"10.1.2.3:18377":  "http://10.1.2.3:18377",
	} {
		require.Equal(t, want, servingURL(addr), addr)
	}
	require.Equal(t, "127.0.0.1:18378", hostOf("http://127.0.0.1:18378"))
}
