// Package ids makes the identifiers Stackbone hands out: a short prefix and
// random, URL-safe characters ("int_…", "run_…", "msg_…").
package ids

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

var enc = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// Generator makes ids; tests inject a deterministic one.
type Generator func(prefix string) string

// New returns prefix + "_" + 20 random characters (100 bits).
func New(prefix string) string {
	var b [13]byte
	_, _ = rand.Read(b[:])
	var sb strings.Builder
	sb.Grow(len(prefix) + 22)
	sb.WriteString(prefix)
	sb.WriteByte('_')
	sb.WriteString(enc.EncodeToString(b[:])[:20])
	return sb.String()
}
