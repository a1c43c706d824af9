//go:build linux

package cli_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
)

// limitFileSize sets the soft RLIMIT_FSIZE of process pid (the hard limit
// stays): a write that would grow a file past it fails with EFBIG, as a
// write to a full disk fails (Go ignores the SIGXFSZ that comes with it).
func limitFileSize(t *testing.T, pid int, limit uint64) {
	t.Helper()
	var cur syscall.Rlimit
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE, 0, uintptr(unsafe.Pointer(&cur)), 0, 0); e != 0 {
		t.Fatalf("read the file size limit: %v", e)
	}
	next := syscall.Rlimit{Cur: limit, Max: cur.Max}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE, uintptr(unsafe.Pointer(&next)), 0, 0, 0); e != 0 {
		t.Fatalf("set the file size limit: %v", e)
	}
}

// TestHealthzWhenSQLiteCannotWrite runs `stackbone dev` on SQLite and then
// keeps its database files from growing (a file size limit on the process:
// the disk is full as far as SQLite can tell). A turn that must write more
// than the files hold fails with 503, and /healthz, which answered 200
// before, answers 503 store_unwritable although the database still answers
// reads; once the files may grow again, the next write succeeds and
// /healthz is 200 again.
func TestHealthzWhenSQLiteCannotWrite(t *testing.T) {
	t.Parallel()
	mock := modeltest.Handler(modeltest.OpenAI, script.MustParse(`[{"reply":{"text":"echo: ok"}}]`))
	up := httptest.NewServer(mock)
	defer up.Close()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	agentTS := "import { defineDeepAgent } from 'stackbone';\nexport default defineDeepAgent({ name: 'shop', model: 'openai/test-model', instructions: 'Echo.' });\n"
	if err := os.WriteFile(filepath.Join(dir, "agents", "shop.ts"), []byte(agentTS), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServer(t, []string{"OPENAI_BASE_URL=" + up.URL + "/v1", "OPENAI_API_KEY=sk-test"}, "dev", "--dir", dir, "--addr", "127.0.0.1:0")
	health := func() (int, string) {
		var body struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		code := getJSON(t, p.URL()+"/healthz", &body)
		return code, body.Error.Code
	}
	if code, _ := post(t, p.URL(), "", "disk", "hello"); code != 200 {
		t.Fatalf("a turn before: %d", code)
	}
	if code, reason := health(); code != 200 {
		t.Fatalf("healthz before: %d %s", code, reason)
	}

	wal, err := os.Stat(filepath.Join(dir, ".stackbone", "stackbone.db-wal"))
	if err != nil {
		t.Fatal(err)
	}
	if wal.Size() > 3<<20 {
		t.Fatalf("the WAL holds %d bytes: a message that does not fit in it would pass the body limit", wal.Size())
	}
	limitFileSize(t, p.Cmd.Process.Pid, 0)
	big := strings.Repeat("x", int(wal.Size())+512<<10) // more than the files hold: they must grow
	code, body := post(t, p.URL(), "", "disk", big)
	if code != 503 || !strings.Contains(body, `"code":"store_unavailable"`) {
		t.Fatalf("a turn on a full disk: %d %.300s", code, body)
	}
	var threads struct {
		Data []json.RawMessage `json:"data"`
	}
	if code := getJSON(t, p.URL()+"/v1/threads", &threads); code != 200 || len(threads.Data) != 1 {
		t.Fatalf("reads must still work: %d, %d threads", code, len(threads.Data))
	}
	if code, reason := health(); code != 503 || reason != "store_unwritable" {
		t.Fatalf("healthz while writes fail: %d %q; want 503 store_unwritable", code, reason)
	}

	limitFileSize(t, p.Cmd.Process.Pid, ^uint64(0)) // RLIM_INFINITY
	if code, body := post(t, p.URL(), "", "disk", big); code != 200 {
		t.Fatalf("the same turn once the disk has room: %d %.300s", code, body)
	}
	if code, reason := health(); code != 200 {
		t.Fatalf("healthz once writes succeed again: %d %s", code, reason)
	}
}
