package sqlite

import "testing"

// TestRebind: numbered parameters become SQLite's, and casts and row locks
// (FOR UPDATE, FOR SHARE) go.
func TestRebind(t *testing.T) {
	for in, want := range map[string]string{
		`SELECT a FROM t WHERE x = $1 AND y = $12`:                     `SELECT a FROM t WHERE x = ?1 AND y = ?12`,
		`INSERT INTO t (j) VALUES ($1::json)`:                          `INSERT INTO t (j) VALUES (?1)`,
		`SELECT 1 FROM t WHERE id = $1 FOR UPDATE`:                     `SELECT 1 FROM t WHERE id = ?1`,
		`SELECT deleted FROM t WHERE id = $1 FOR SHARE`:                `SELECT deleted FROM t WHERE id = ?1`,
		`SELECT id FROM t ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`: `SELECT id FROM t ORDER BY id LIMIT ?1`,
	} {
		if got := rebind(in); got != want {
			t.Errorf("rebind(%q) = %q, want %q", in, got, want)
		}
	}
}
