package ids

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxClientBytes is the longest id a client may choose: a session key
// (x-stackbone-session), an AG-UI threadId, runId or interruptId.
const MaxClientBytes = 256

// CheckClient reports why an id a client chose cannot name a thread, a run
// or a decision, as a sentence fragment ("is longer than 256 bytes"); nil
// when it can. An id must be valid UTF-8 of at most MaxClientBytes bytes,
// without control characters (NUL, newlines) or invisible formatting ones
// (bidi overrides such as U+202E, zero-width characters, line separators):
// they would be stored, logged and shown in Studio and the CLI as something
// other than what they are. The empty id is left to the caller (a stateless
// turn has none).
func CheckClient(id string) error {
	if len(id) > MaxClientBytes {
		return fmt.Errorf("is longer than %d bytes", MaxClientBytes)
	}
	if !utf8.ValidString(id) {
		return errors.New("is not valid UTF-8")
	}
	for _, r := range id {
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			return fmt.Errorf("contains the control or formatting character %U", r)
		}
	}
	return nil
}
