package studio_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestMemoryPage: Studio's Memory page lists the tenant's namespaces and,
// for the one chosen, its items (key, value, expiry); a search narrows
// them, and Delete removes an item from the store.
func TestMemoryPage(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	for _, b := range []string{
		`{"namespace":["users","u1"],"key":"tea","value":{"fact":"likes genmaicha"}}`,
		`{"namespace":["users","u1"],"key":"city","value":{"fact":"lives in Lyon"},"ttl":60}`,
		`{"namespace":["teams","t1"],"key":"name","value":{"fact":"the blue team"}}`,
	} {
		if r := do(t, "PUT", env.URL+"/v1/store/items", b); r.status != 204 {
			t.Fatalf("put %s: %d %s", b, r.status, r.body)
		}
	}
	p := newPage(t)
	p.open(env.URL + "/studio/#/memory")
	p.waitText(`#memory-namespaces li[data-namespace="teams.t1"] a`, "teams / t1")
	p.waitText(`tr[data-item="teams.t1/name"] .value`, "the blue team")
	p.click(`#memory-namespaces li[data-namespace="users.u1"] a`)
	p.waitText("h1", "Memory: users / u1")
	p.waitText(`tr[data-item="users.u1/tea"] .value`, "genmaicha")
	p.waitJS("the expiry of city", `document.querySelector('tr[data-item="users.u1/city"] .expires time') !== null`)
	p.waitJS("only u1's items", `document.querySelector('tr[data-item="teams.t1/name"]') === null`)
	p.do(chromedp.SetValue(chromedp.CSS("#memory-query"), "lyon"))
	p.click(`#memory-search button`)
	p.waitJS("the search", `document.querySelectorAll('#memory-items tbody tr').length === 1 && !!document.querySelector('tr[data-item="users.u1/city"]')`)
	eval[bool](p, `(window.confirm = () => true, true)`)
	p.click(`tr[data-item="users.u1/city"] button[data-delete]`)
	// The empty note's text is set (hidden) with every render, so wait for
	// the row to go and the note to show, not for its text.
	p.waitJS("the row gone", `document.querySelector('tr[data-item="users.u1/city"]') === null && !document.querySelector('#memory-items + .empty').hidden`)
	p.waitText("#memory-items + .empty", "No item matches the search.")
	if r := do(t, "GET", env.URL+"/v1/store/items?namespace=users.u1&key=city", ""); r.status != 404 {
		t.Fatalf("the deleted item: %d %s", r.status, r.body)
	}
}
