package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

// memoryTests are the memory store cases (store.MemoryStore) Run runs.
var memoryTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Memory/PutGetOverwrite", testMemoryPutGet},
	{"Memory/Delete", testMemoryDelete},
	{"Memory/TTLExpiryAndSweep", testMemoryTTL},
	{"Memory/RefreshOnRead", testMemoryRefresh},
	{"Memory/SearchPrefix", testMemorySearchPrefix},
	{"Memory/SearchFilter", testMemorySearchFilter},
	{"Memory/SearchContains", testMemorySearchContains},
	{"Memory/SearchVectorOrder", testMemorySearchVector},
	{"Memory/SearchPaging", testMemorySearchPaging},
	{"Memory/ListNamespaces", testMemoryNamespaces},
	{"Memory/TenantIsolation", testMemoryTenants},
	{"Memory/InvalidWritesNothing", testMemoryInvalid},
}

func memPut(t *testing.T, s store.Store, p store.MemoryPut) *store.MemoryItem {
	t.Helper()
	if p.Tenant == "" {
		p.Tenant = "acme"
	}
	if p.Now.IsZero() {
		p.Now = T0
	}
	it, err := s.MemoryPut(t.Context(), p)
	if err != nil {
		t.Fatalf("MemoryPut %v/%s: %v", p.Namespace, p.Key, err)
	}
	return it
}

func memGet(t *testing.T, s store.Store, tenant string, ns []string, key string, now time.Time) (*store.MemoryItem, error) {
	t.Helper()
	return s.MemoryGet(t.Context(), store.MemoryGet{Tenant: tenant, Namespace: ns, Key: key, Now: now})
}

func memSearch(t *testing.T, s store.Store, q store.MemorySearch) []store.MemoryItem {
	t.Helper()
	if q.Tenant == "" {
		q.Tenant = "acme"
	}
	if q.Now.IsZero() {
		q.Now = T0
	}
	out, err := s.MemorySearch(t.Context(), q)
	if err != nil {
		t.Fatalf("MemorySearch %+v: %v", q, err)
	}
	return out
}

// keys is "ns/key" of each item, in order.
func keys(items []store.MemoryItem) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, store.JoinNamespace(it.Namespace)+"/"+it.Key)
	}
	return out
}

func testMemoryPutGet(t *testing.T, s store.Store) {
	ns := []string{"users", "u1"}
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "pref", Value: json.RawMessage(`{"color": "blue", "n": 1}`)})
	it, err := memGet(t, s, "acme", ns, "pref", at(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "value", it.Value, json.RawMessage(`{"color":"blue","n":1}`))
	if !reflect.DeepEqual(it.Namespace, ns) || it.Key != "pref" || !it.CreatedAt.Equal(T0) || !it.UpdatedAt.Equal(T0) || it.ExpiresAt != nil || it.Indexed {
		t.Fatalf("item: %+v", it)
	}
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "pref", Value: json.RawMessage(`{"color":"red"}`), Now: at(time.Hour)})
	it, err = memGet(t, s, "acme", ns, "pref", at(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "overwritten value", it.Value, json.RawMessage(`{"color":"red"}`))
	if !it.CreatedAt.Equal(T0) || !it.UpdatedAt.Equal(at(time.Hour)) {
		t.Fatalf("an overwrite keeps created_at and moves updated_at: %+v", it)
	}
	if _, err := memGet(t, s, "acme", ns, "other", T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := memGet(t, s, "acme", []string{"users"}, "pref", T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a parent namespace does not hold the child's items: %v", err)
	}
}

func testMemoryDelete(t *testing.T, s store.Store) {
	ns := []string{"notes"}
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "a", Value: json.RawMessage(`{"x":1}`)})
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "b", Value: json.RawMessage(`{"x":2}`)})
	if err := s.MemoryDelete(t.Context(), "acme", ns, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := memGet(t, s, "acme", ns, "a", T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted: %v", err)
	}
	if err := s.MemoryDelete(t.Context(), "acme", ns, "a"); err != nil {
		t.Fatalf("deleting again: %v", err)
	}
	if _, err := memGet(t, s, "acme", ns, "b", T0); err != nil {
		t.Fatalf("the other item: %v", err)
	}
}

// testMemoryTTL: an item with a TTL is returned strictly before its
// expiry, by no read at or after it (before the sweep too), and the sweep
// deletes exactly the expired items; putting an expired item again makes
// a new one.
func testMemoryTTL(t *testing.T, s store.Store) {
	ns := []string{"sessions"}
	it := memPut(t, s, store.MemoryPut{Namespace: ns, Key: "short", Value: json.RawMessage(`{"v":1}`), TTL: time.Minute})
	if it.ExpiresAt == nil || !it.ExpiresAt.Equal(at(time.Minute)) {
		t.Fatalf("expires_at: %+v", it.ExpiresAt)
	}
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "long", Value: json.RawMessage(`{"v":2}`), TTL: time.Hour})
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "forever", Value: json.RawMessage(`{"v":3}`)})
	if _, err := memGet(t, s, "acme", ns, "short", at(time.Minute-time.Microsecond)); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	if _, err := memGet(t, s, "acme", ns, "short", at(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("at expiry, unswept: %v", err)
	}
	if got := keys(memSearch(t, s, store.MemorySearch{Prefix: ns, Now: at(2 * time.Minute)})); !reflect.DeepEqual(got, []string{"sessions/forever", "sessions/long"}) &&
		!reflect.DeepEqual(got, []string{"sessions/long", "sessions/forever"}) {
		t.Fatalf("search after expiry: %v", got)
	}
	if nss, _ := s.MemoryListNamespaces(t.Context(), store.MemoryNamespaces{Tenant: "acme", Now: at(2 * time.Hour)}); len(nss) != 1 {
		t.Fatalf("namespaces after expiry: %v", nss)
	}
	n, err := s.MemorySweep(t.Context(), at(2*time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if n, _ := s.MemorySweep(t.Context(), at(2*time.Minute)); n != 0 {
		t.Fatalf("second sweep: %d", n)
	}
	again := memPut(t, s, store.MemoryPut{Namespace: ns, Key: "long", Value: json.RawMessage(`{"v":4}`), Now: at(3 * time.Hour)})
	if !again.CreatedAt.Equal(at(3 * time.Hour)) {
		t.Fatalf("an expired item put again is new: %+v", again)
	}
	if again.ExpiresAt != nil {
		t.Fatalf("a put without a TTL never expires: %+v", again.ExpiresAt)
	}
	if _, err := memGet(t, s, "acme", ns, "long", at(100*time.Hour)); err != nil {
		t.Fatal(err)
	}
}

// testMemoryRefresh: a read with refresh renews the item's TTL from the
// read; a read without does not; search with refresh renews what it
// returns.
func testMemoryRefresh(t *testing.T, s store.Store) {
	ns := []string{"cache"}
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "k", Value: json.RawMessage(`{"v":1}`), TTL: 10 * time.Minute})
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "s", Value: json.RawMessage(`{"v":2}`), TTL: 10 * time.Minute})
	if _, err := memGet(t, s, "acme", ns, "k", at(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	it, err := s.MemoryGet(t.Context(), store.MemoryGet{Tenant: "acme", Namespace: ns, Key: "k", Refresh: true, Now: at(9 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if it.ExpiresAt == nil || !it.ExpiresAt.Equal(at(19*time.Minute)) {
		t.Fatalf("refreshed expiry: %v", it.ExpiresAt)
	}
	if _, err := memGet(t, s, "acme", ns, "k", at(18*time.Minute)); err != nil {
		t.Fatalf("after the refreshed read, before the new expiry: %v", err)
	}
	if _, err := memGet(t, s, "acme", ns, "k", at(19*time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("at the new expiry: %v", err)
	}
	got := memSearch(t, s, store.MemorySearch{Prefix: ns, Filter: map[string]json.RawMessage{"v": json.RawMessage(`2`)}, Refresh: true, Now: at(9 * time.Minute)})
	if len(got) != 1 || got[0].ExpiresAt == nil || !got[0].ExpiresAt.Equal(at(19*time.Minute)) {
		t.Fatalf("search with refresh: %+v", got)
	}
	if _, err := memGet(t, s, "acme", ns, "s", at(15*time.Minute)); err != nil {
		t.Fatalf("a searched item with refresh: %v", err)
	}
}

func testMemorySearchPrefix(t *testing.T, s store.Store) {
	for i, ns := range [][]string{{"users", "u1"}, {"users", "u1", "prefs"}, {"users", "u10"}, {"users", "u2"}, {"teams", "t1"}, {"users"}} {
		memPut(t, s, store.MemoryPut{Namespace: ns, Key: "k", Value: json.RawMessage(`{}`), Now: at(time.Duration(i) * time.Minute)})
	}
	got := keys(memSearch(t, s, store.MemorySearch{Prefix: []string{"users", "u1"}}))
	if !reflect.DeepEqual(got, []string{"users.u1.prefs/k", "users.u1/k"}) {
		t.Fatalf("prefix users.u1 (latest first; not users.u10): %v", got)
	}
	got = keys(memSearch(t, s, store.MemorySearch{Prefix: []string{"users"}, Limit: 100}))
	if !reflect.DeepEqual(got, []string{"users/k", "users.u2/k", "users.u10/k", "users.u1.prefs/k", "users.u1/k"}) {
		t.Fatalf("prefix users: %v", got)
	}
	if got := memSearch(t, s, store.MemorySearch{Limit: 100}); len(got) != 6 {
		t.Fatalf("no prefix: %v", keys(got))
	}
}

func testMemorySearchFilter(t *testing.T, s store.Store) {
	ns := []string{"docs"}
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "a", Value: json.RawMessage(`{"kind":"note","n":1,"tags":["x"]}`)})
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "b", Value: json.RawMessage(`{"kind":"todo","n":1}`)})
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "c", Value: json.RawMessage(`{"kind":"note","n":2.0}`)})
	f := func(pairs ...string) map[string]json.RawMessage {
		m := map[string]json.RawMessage{}
		for i := 0; i < len(pairs); i += 2 {
			m[pairs[i]] = json.RawMessage(pairs[i+1])
		}
		return m
	}
	for _, c := range []struct {
		filter map[string]json.RawMessage
		want   []string
	}{
		{f("kind", `"note"`), []string{"a", "c"}},
		{f("kind", `"note"`, "n", `2`), []string{"c"}},
		{f("n", `1`), []string{"a", "b"}},
		{f("tags", `["x"]`), []string{"a"}},
		{f("missing", `null`), []string{}},
	} {
		var got []string
		for _, it := range memSearch(t, s, store.MemorySearch{Prefix: ns, Filter: c.filter}) {
			got = append(got, it.Key)
		}
		if got == nil {
			got = []string{}
		}
		sortStrings(got)
		if !reflect.DeepEqual(got, c.want) {
			t.Fatalf("filter %v: got %v, want %v", c.filter, got, c.want)
		}
	}
}

func testMemorySearchContains(t *testing.T, s store.Store) {
	ns := []string{"facts"}
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "a", Value: json.RawMessage(`{"fact":"Likes GREEN tea"}`)})
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "b", Value: json.RawMessage(`{"fact":"Lives in Paris"}`)})
	got := memSearch(t, s, store.MemorySearch{Prefix: ns, Contains: "green"})
	if len(got) != 1 || got[0].Key != "a" {
		t.Fatalf("contains green: %v", keys(got))
	}
}

// testMemorySearchVector: with a vector, items come by cosine similarity
// (the stored embeddings' length does not matter), with the score; items
// without an embedding of the query's length come last.
func testMemorySearchVector(t *testing.T, s store.Store) {
	ns := []string{"vec"}
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "x", Value: json.RawMessage(`{"v":"x"}`), Embedding: []float32{10, 0, 0}})
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "xy", Value: json.RawMessage(`{"v":"xy"}`), Embedding: []float32{1, 1, 0}, Now: at(time.Minute)})
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "y", Value: json.RawMessage(`{"v":"y"}`), Embedding: []float32{0, 3, 0}, Now: at(2 * time.Minute)})
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "none", Value: json.RawMessage(`{"v":"none"}`), Now: at(3 * time.Minute)})
	memPut(t, s, store.MemoryPut{Namespace: ns, Key: "2d", Value: json.RawMessage(`{"v":"2d"}`), Embedding: []float32{1, 0}, Now: at(4 * time.Minute)})
	got := memSearch(t, s, store.MemorySearch{Prefix: ns, Vector: []float32{2, 0.5, 0}, Limit: 10})
	if k := keys(got); !reflect.DeepEqual(k, []string{"vec/x", "vec/xy", "vec/y", "vec/2d", "vec/none"}) {
		t.Fatalf("vector order: %v", k)
	}
	if got[0].Score == nil || *got[0].Score < 0.96 || *got[0].Score > 0.98 || got[3].Score != nil {
		t.Fatalf("scores: %v %v", got[0].Score, got[3].Score)
	}
	if !got[0].Indexed || got[4].Indexed {
		t.Fatal("Indexed")
	}
	got = memSearch(t, s, store.MemorySearch{Prefix: ns, Vector: []float32{0, 1, 0}, Limit: 1, Offset: 1})
	if k := keys(got); !reflect.DeepEqual(k, []string{"vec/xy"}) {
		t.Fatalf("second nearest to y: %v", k)
	}
	got = memSearch(t, s, store.MemorySearch{Prefix: ns, Vector: []float32{0, 1, 0}, Filter: map[string]json.RawMessage{"v": json.RawMessage(`"x"`)}})
	if k := keys(got); !reflect.DeepEqual(k, []string{"vec/x"}) {
		t.Fatalf("vector with filter: %v", k)
	}
}

func testMemorySearchPaging(t *testing.T, s store.Store) {
	ns := []string{"page"}
	for i := range 25 {
		memPut(t, s, store.MemoryPut{Namespace: ns, Key: fmt.Sprintf("k%02d", i), Value: json.RawMessage(fmt.Sprintf(`{"i":%d,"even":%v}`, i, i%2 == 0)),
			Now: at(time.Duration(i) * time.Second)})
	}
	if got := memSearch(t, s, store.MemorySearch{Prefix: ns}); len(got) != store.DefaultMemoryLimit || got[0].Key != "k24" {
		t.Fatalf("default page: %v", keys(got))
	}
	got := memSearch(t, s, store.MemorySearch{Prefix: ns, Limit: 3, Offset: 20})
	if k := keys(got); !reflect.DeepEqual(k, []string{"page/k04", "page/k03", "page/k02"}) {
		t.Fatalf("offset 20 limit 3: %v", k)
	}
	got = memSearch(t, s, store.MemorySearch{Prefix: ns, Limit: 2, Offset: 1, Filter: map[string]json.RawMessage{"even": json.RawMessage(`true`)}})
	if k := keys(got); !reflect.DeepEqual(k, []string{"page/k22", "page/k20"}) {
		t.Fatalf("filtered page: %v", k)
	}
	if got := memSearch(t, s, store.MemorySearch{Prefix: ns, Offset: 30}); len(got) != 0 {
		t.Fatalf("past the end: %v", keys(got))
	}
}

func testMemoryNamespaces(t *testing.T, s store.Store) {
	for _, ns := range [][]string{{"a", "b", "c"}, {"a", "b", "d"}, {"a", "e"}, {"x", "b", "c"}, {"x"}} {
		memPut(t, s, store.MemoryPut{Namespace: ns, Key: "k", Value: json.RawMessage(`{}`)})
	}
	memPut(t, s, store.MemoryPut{Namespace: []string{"a", "ttl"}, Key: "k", Value: json.RawMessage(`{}`), TTL: time.Second})
	list := func(n store.MemoryNamespaces) string {
		t.Helper()
		n.Tenant = "acme"
		n.Now = at(time.Minute)
		out, err := s.MemoryListNamespaces(t.Context(), n)
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, ns := range out {
			parts = append(parts, store.JoinNamespace(ns))
		}
		return strings.Join(parts, " ")
	}
	for _, c := range []struct {
		n    store.MemoryNamespaces
		want string
	}{
		{store.MemoryNamespaces{}, "a.b.c a.b.d a.e x x.b.c"},
		{store.MemoryNamespaces{Prefix: []string{"a"}}, "a.b.c a.b.d a.e"},
		{store.MemoryNamespaces{Prefix: []string{"a"}, MaxDepth: 2}, "a.b a.e"},
		{store.MemoryNamespaces{MaxDepth: 1}, "a x"},
		{store.MemoryNamespaces{Suffix: []string{"b", "c"}}, "a.b.c x.b.c"},
		{store.MemoryNamespaces{Limit: 2, Offset: 1}, "a.b.d a.e"},
		{store.MemoryNamespaces{Prefix: []string{"nope"}}, ""},
	} {
		if got := list(c.n); got != c.want {
			t.Fatalf("%+v: got %q, want %q", c.n, got, c.want)
		}
	}
}

func testMemoryTenants(t *testing.T, s store.Store) {
	ns := []string{"shared"}
	memPut(t, s, store.MemoryPut{Tenant: "a", Namespace: ns, Key: "k", Value: json.RawMessage(`{"owner":"a"}`), Embedding: []float32{1, 0}})
	memPut(t, s, store.MemoryPut{Tenant: "b", Namespace: ns, Key: "k", Value: json.RawMessage(`{"owner":"b"}`), Embedding: []float32{1, 0}})
	it, err := memGet(t, s, "b", ns, "k", T0)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "b's item", it.Value, json.RawMessage(`{"owner":"b"}`))
	if err := s.MemoryDelete(t.Context(), "a", ns, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := memGet(t, s, "b", ns, "k", T0); err != nil {
		t.Fatalf("a's delete left b's item: %v", err)
	}
	for _, q := range []store.MemorySearch{{Tenant: "b"}, {Tenant: "b", Vector: []float32{1, 0}}} {
		got := memSearch(t, s, q)
		if len(got) != 1 {
			t.Fatalf("b's search: %v", keys(got))
		}
		sameJSON(t, "b's search", got[0].Value, json.RawMessage(`{"owner":"b"}`))
	}
	if got := memSearch(t, s, store.MemorySearch{Tenant: "a"}); len(got) != 0 {
		t.Fatalf("a's search: %v", keys(got))
	}
	if nss, _ := s.MemoryListNamespaces(t.Context(), store.MemoryNamespaces{Tenant: "c", Now: T0}); len(nss) != 0 {
		t.Fatalf("c's namespaces: %v", nss)
	}
}

// testMemoryInvalid: every refused put is a *MemoryError (ErrInvalid) and
// writes nothing.
func testMemoryInvalid(t *testing.T, s store.Store) {
	big := `{"s":"` + strings.Repeat("x", store.MaxMemoryValueBytes) + `"}`
	deep := make([]string, store.MaxMemoryDepth+1)
	for i := range deep {
		deep[i] = "l"
	}
	for _, c := range []struct {
		name  string
		p     store.MemoryPut
		field string
	}{
		{"no namespace", store.MemoryPut{Key: "k", Value: json.RawMessage(`{}`)}, "namespace"},
		{"empty label", store.MemoryPut{Namespace: []string{"a", ""}, Key: "k", Value: json.RawMessage(`{}`)}, "namespace"},
		{"dotted label", store.MemoryPut{Namespace: []string{"a.b"}, Key: "k", Value: json.RawMessage(`{}`)}, "namespace"},
		{"control label", store.MemoryPut{Namespace: []string{"a\x01"}, Key: "k", Value: json.RawMessage(`{}`)}, "namespace"},
		{"too deep", store.MemoryPut{Namespace: deep, Key: "k", Value: json.RawMessage(`{}`)}, "namespace"},
		{"no key", store.MemoryPut{Namespace: []string{"a"}, Value: json.RawMessage(`{}`)}, "key"},
		{"NUL key", store.MemoryPut{Namespace: []string{"a"}, Key: "k\x00", Value: json.RawMessage(`{}`)}, "key"},
		{"array value", store.MemoryPut{Namespace: []string{"a"}, Key: "k", Value: json.RawMessage(`[1]`)}, "value"},
		{"bad JSON", store.MemoryPut{Namespace: []string{"a"}, Key: "k", Value: json.RawMessage(`{"a":`)}, "value"},
		{"too big", store.MemoryPut{Namespace: []string{"a"}, Key: "k", Value: json.RawMessage(big)}, "value"},
		{"negative TTL", store.MemoryPut{Namespace: []string{"a"}, Key: "k", Value: json.RawMessage(`{}`), TTL: -time.Second}, "ttl"},
		{"zero embedding", store.MemoryPut{Namespace: []string{"a"}, Key: "k", Value: json.RawMessage(`{}`), Embedding: []float32{0, 0}}, "embedding"},
	} {
		c.p.Tenant, c.p.Now = "acme", T0
		_, err := s.MemoryPut(t.Context(), c.p)
		var me *store.MemoryError
		if !errors.Is(err, store.ErrInvalid) || !errors.As(err, &me) || me.Field != c.field {
			t.Fatalf("%s: got %v, want a MemoryError on %s", c.name, err, c.field)
		}
	}
	if got := memSearch(t, s, store.MemorySearch{Limit: 100}); len(got) != 0 {
		t.Fatalf("refused puts wrote %v", keys(got))
	}
	if _, err := s.MemorySearch(t.Context(), store.MemorySearch{Tenant: "acme", Prefix: []string{""}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("search with an empty label: %v", err)
	}
	if _, err := s.MemoryGet(t.Context(), store.MemoryGet{Tenant: "acme", Key: "k"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("get without a namespace: %v", err)
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
