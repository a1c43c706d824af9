package ids

import (
	"strings"
	"testing"
)

func TestCheckClient(t *testing.T) {
	for _, ok := range []string{"", "thread-1", "agui-4f1c0b6e-9d1a-4c1e-8f55-2d4b1b0d0c11", "café ☕ 会话", strings.Repeat("a", MaxClientBytes)} {
		if err := CheckClient(ok); err != nil {
			t.Errorf("CheckClient(%q) = %v, want nil", ok, err)
		}
	}
	for bad, want := range map[string]string{
		strings.Repeat("a", MaxClientBytes+1): "longer than 256 bytes",
		strings.Repeat("a", 1<<20):            "longer than 256 bytes",
		"bad\xffutf8":                         "not valid UTF-8",
		"nul\x00byte":                         "U+0000",
		"line\nbreak":                         "U+000A",
		"evil\u202Etxt.exe":                   "U+202E",
		"zero\u200Bwidth":                     "U+200B",
		"line\u2028sep":                       "U+2028",
	} {
		err := CheckClient(bad)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckClient(%.20q) = %v, want an error naming %q", bad, err, want)
		}
	}
}
