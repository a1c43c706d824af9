package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/postgres"
	"github.com/stackbone/stackbone/internal/store/sqlite"
)

// TestWebhookDeliveriesPerTenant: GET /v1/webhooks/deliveries lists only
// the caller's tenant's deliveries, with the endpoint's token hidden; a bad
// limit is a 400 in the OpenAI error envelope.
func TestWebhookDeliveriesPerTenant(t *testing.T) {
	t.Parallel()
	keys := []config.Key{{Tenant: "acme", Secret: "sk-acme-0001", Role: config.RoleCaller, Label: "acme"},
		{Tenant: "beta", Secret: "sk-beta-0001", Role: config.RoleAdmin, Label: "beta"}}
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: keys, Configure: func(c *config.Config) {
		c.WebhookURLs = []string{"http://127.0.0.1:9/hook?token=hunter22"}
		c.WebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	}})
	pauseAs(t, env, "sk-acme-0001", "wh-1")
	type page struct {
		Data []struct {
			Type, Status, Endpoint string
			Data                   struct{ ThreadID, Tool string }
		}
		Endpoints []string
	}
	list := func(key string) page {
		t.Helper()
		r := call(t, "GET", env.URL+"/v1/webhooks/deliveries", "", "Authorization", "Bearer "+key)
		var p page
		if r.status != 200 || json.Unmarshal(r.body, &p) != nil {
			t.Fatalf("deliveries: %d %s", r.status, r.body)
		}
		if strings.Contains(string(r.body), "hunter22") {
			t.Fatalf("the endpoint's token is shown: %s", r.body)
		}
		return p
	}
	a := list("sk-acme-0001")
	if len(a.Data) != 1 || a.Data[0].Type != "decision.pending" || a.Data[0].Status != "pending" ||
		a.Data[0].Data.ThreadID != "wh-1" || a.Data[0].Data.Tool != "refund" || a.Data[0].Endpoint != "http://127.0.0.1:9/hook?…" ||
		len(a.Endpoints) != 1 {
		t.Fatalf("acme's deliveries: %+v", a)
	}
	if b := list("sk-beta-0001"); len(b.Data) != 0 {
		t.Fatalf("beta sees acme's deliveries: %+v", b)
	}
	r := call(t, "GET", env.URL+"/v1/webhooks/deliveries?limit=0", "", "Authorization", "Bearer sk-acme-0001")
	if r.status != 400 || !strings.Contains(string(r.body), `"param":"limit"`) {
		t.Fatalf("a bad limit: %d %s", r.status, r.body)
	}
}

// TestWebhookRowsHoldNoURL: with an endpoint URL carrying user info and a
// token, the outbox rows (SQLite file, PostgreSQL table) hold a reference
// to the endpoint, never the URL; the deliveries API shows the URL with
// its user info and query hidden as "…" (not percent-encoded); and a row
// written with a URL by an older version is rewritten to the reference at
// the next open.
func TestWebhookRowsHoldNoURL(t *testing.T) {
	t.Parallel()
	const hook = "http://hookuser:hookpass-77@127.0.0.1:9/hook?token=t0ps3cret-99"
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			opts := stacktest.Options{Configure: func(c *config.Config) {
				c.WebhookURLs = []string{hook}
				c.WebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
			}}
			var pg *postgres.Store
			if driver == "postgres" {
				pg = stacktest.Postgres(t, "whref")
				opts.Store = pg
			}
			env := stacktest.New(t, opts)
			pauseAs(t, env, "sk-local", "wh-ref")
			r := call(t, "GET", env.URL+"/v1/webhooks/deliveries", "")
			var p struct {
				Data      []struct{ Endpoint string }
				Endpoints []string
			}
			if err := json.Unmarshal(r.body, &p); err != nil || len(p.Data) != 1 || p.Data[0].Endpoint != "http://…@127.0.0.1:9/hook?…" ||
				len(p.Endpoints) != 1 || p.Endpoints[0] != "http://…@127.0.0.1:9/hook?…" {
				t.Fatalf("deliveries: %d %s", r.status, r.body)
			}
			ref := store.WebhookRef(hook)
			var rows []string
			legacy := "http://other:pw-legacy-1@127.0.0.1:9/old?token=legacy-tok-42"
			ctx := context.Background()
			if pg != nil {
				conn, err := pgx.Connect(ctx, stacktest.PostgresURL())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				tbl := pgx.Identifier{pg.Schema(), "webhook_outbox"}.Sanitize()
				if _, err := conn.Exec(ctx, `INSERT INTO `+tbl+` (id, endpoint, tenant, type, data, created_at, next_at)
					VALUES ('msg_legacy', $1, 'dev', 'run.completed', '{}', now(), now())`, legacy); err != nil {
					t.Fatal(err)
				}
				stacktest.PostgresReplica(t, pg) // a new version opens the schema
				rs, _ := conn.Query(ctx, `SELECT endpoint FROM `+tbl+` ORDER BY id`)
				if rows, err = pgx.CollectRows(rs, pgx.RowTo[string]); err != nil {
					t.Fatal(err)
				}
			} else {
				db, err := sql.Open("sqlite", env.Config.SQLitePath())
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if _, err := db.ExecContext(ctx, `INSERT INTO webhook_outbox (id, endpoint, tenant, type, data, created_at, next_at)
					VALUES ('msg_legacy', ?, 'dev', 'run.completed', '{}', 1, 1)`, legacy); err != nil {
					t.Fatal(err)
				}
				again, err := sqlite.Open(ctx, env.Config.SQLitePath(), nil) // a new version opens the file
				if err != nil {
					t.Fatal(err)
				}
				again.Close()
				rs, err := db.QueryContext(ctx, `SELECT endpoint FROM webhook_outbox ORDER BY id`)
				if err != nil {
					t.Fatal(err)
				}
				for rs.Next() {
					var e string
					_ = rs.Scan(&e)
					rows = append(rows, e)
				}
				rs.Close()
			}
			slices.Sort(rows)
			want := []string{store.WebhookRef(legacy), ref}
			slices.Sort(want)
			if !slices.Equal(rows, want) {
				t.Fatalf("outbox endpoints %q, want the references %q and %q", rows, store.WebhookRef(legacy), ref)
			}
			if driver == "sqlite" {
				files, _ := filepath.Glob(env.Config.SQLitePath() + "*")
				for _, f := range files {
					b, _ := os.ReadFile(f)
					for _, secret := range []string{"t0ps3cret-99", "hookpass-77"} {
						if strings.Contains(string(b), secret) {
							t.Errorf("%s holds %q", f, secret)
						}
					}
				}
			}
		})
	}
}
