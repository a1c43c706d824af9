package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// healthCode is /healthz's status and, for a 503, its error code.
func healthCode(t *testing.T, env *stacktest.Env) (int, string) {
	t.Helper()
	r := call(t, "GET", env.URL+"/healthz", "")
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &body)
	return r.status, body.Error.Code
}

// TestHealthzReportsWritesThatFail on PostgreSQL: a database that answers
// (its pings succeed) but refuses every write as a full disk does (SQLSTATE
// 53100, raised by a trigger on every table of the test's schema) makes
// /healthz answer 503 store_unwritable once a write failed, and, with no
// traffic, again when its probe write fails HealthWriteWindow later; once
// writes succeed again the next probe makes it 200.
func TestHealthzReportsWritesThatFail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := clock.NewFake(time.Now())
	st := stacktest.Postgres(t, "unwritable")
	st.SetClock(fake)
	env := stacktest.New(t, stacktest.Options{Store: st, Configure: func(c *config.Config) { c.Clock = fake }})
	if code, _ := healthCode(t, env); code != http.StatusOK {
		t.Fatalf("healthy: %d", code)
	}

	conn, err := pgx.Connect(ctx, stacktest.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	schema := pgx.Identifier{st.Schema()}.Sanitize()
	if _, err := conn.Exec(ctx, `CREATE FUNCTION `+schema+`.disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `DO $$ DECLARE t text; BEGIN
		FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = `+quote(st.Schema())+` LOOP
			EXECUTE format('CREATE TRIGGER disk_full BEFORE INSERT OR UPDATE OR DELETE ON %I.%I FOR EACH STATEMENT EXECUTE FUNCTION %I.disk_full()',
				`+quote(st.Schema())+`, t, `+quote(st.Schema())+`);
		END LOOP; END $$`); err != nil {
		t.Fatal(err)
	}

	r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hello"}]}`, "x-stackbone-session", "full")
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("a turn on a full disk: %d %s", r.status, r.body)
	}
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("the database must still answer pings: %v", err)
	}
	if code, reason := healthCode(t, env); code != http.StatusServiceUnavailable || reason != server.CodeStoreUnwritable {
		t.Fatalf("healthz after a failed write: %d %q; want 503 %s", code, reason, server.CodeStoreUnwritable)
	}
	fake.Advance(server.HealthWriteWindow)
	if code, reason := healthCode(t, env); code != http.StatusServiceUnavailable || reason != server.CodeStoreUnwritable {
		t.Fatalf("healthz when the probe write fails too: %d %q", code, reason)
	}

	if _, err := conn.Exec(ctx, `DROP FUNCTION `+schema+`.disk_full() CASCADE`); err != nil {
		t.Fatal(err)
	}
	if code, _ := healthCode(t, env); code != http.StatusServiceUnavailable {
		t.Fatalf("healthz within the window of the failed probe: %d; want 503 until the next probe", code)
	}
	fake.Advance(server.HealthWriteWindow)
	if code, reason := healthCode(t, env); code != http.StatusOK {
		t.Fatalf("healthz once writes succeed again: %d %q", code, reason)
	}
	if r := call(t, "POST", env.URL+"/v1/chat/completions", `{"model":"assistant","messages":[{"role":"user","content":"hello again"}]}`, "x-stackbone-session", "full"); r.status != http.StatusOK {
		t.Fatalf("a turn after the disk was freed: %d %s", r.status, r.body)
	}
}

// quote is a SQL string literal.
func quote(s string) string {
	b, _ := json.Marshal(s) // the schema names of tests have no quotes or backslashes
	return "'" + string(b[1:len(b)-1]) + "'"
}
