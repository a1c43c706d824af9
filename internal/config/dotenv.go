package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// DotEnvFile is the name of the project's environment file, read from the
// project folder (DIR/.env).
const DotEnvFile = ".env"

// envName is a valid environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validEnvName reports whether name is a valid environment variable name:
// letters, digits and "_", not starting with a digit.
func validEnvName(name string) bool { return envName.MatchString(name) }

// DotEnvError is a syntax error in a .env file. It names the line, never a
// value.
type DotEnvError struct {
	File    string
	Line    int
	Message string
}

// Error returns "file:line: message".
func (e *DotEnvError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Message) }

// ParseDotEnv reads dotenv text: one KEY=VALUE a line; blank lines and lines
// starting with "#" are skipped; an "export " prefix is allowed; a value may
// be 'single-quoted' (taken literally), "double-quoted" (\n, \r, \t, \", \\
// escapes; may span lines) or bare (trimmed, a " #" starts a comment). There
// is no ${VAR} expansion inside values. A later line wins over an earlier
// one. file only names the source in errors.
func ParseDotEnv(file, text string) (map[string]string, error) {
	out := map[string]string{}
	text = strings.TrimPrefix(strings.ReplaceAll(text, "\r\n", "\n"), "\ufeff")
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "export "); ok {
			line = strings.TrimSpace(rest)
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			return nil, &DotEnvError{file, lineNo, "expected KEY=VALUE"}
		}
		key = strings.TrimSpace(key)
		if !validEnvName(key) {
			return nil, &DotEnvError{file, lineNo, fmt.Sprintf("%q is not a valid variable name (letters, digits and _, not starting with a digit)", key)}
		}
		val = strings.TrimLeft(val, " \t")
		switch {
		case strings.HasPrefix(val, "'"):
			end := strings.Index(val[1:], "'")
			if end < 0 {
				return nil, &DotEnvError{file, lineNo, "unterminated single-quoted value of " + key}
			}
			if tail := strings.TrimSpace(val[end+2:]); tail != "" && !strings.HasPrefix(tail, "#") {
				return nil, &DotEnvError{file, lineNo, "unexpected text after the quoted value of " + key}
			}
			out[key] = val[1 : end+1]
		case strings.HasPrefix(val, `"`):
			var b strings.Builder
			s, start, closed := val[1:], lineNo, false
			for !closed {
				for j := 0; j < len(s); j++ {
					c := s[j]
					if c == '\\' && j+1 < len(s) {
						j++
						switch s[j] {
						case 'n':
							b.WriteByte('\n')
						case 'r':
							b.WriteByte('\r')
						case 't':
							b.WriteByte('\t')
						default:
							b.WriteByte(s[j])
						}
						continue
					}
					if c == '"' {
						if tail := strings.TrimSpace(s[j+1:]); tail != "" && !strings.HasPrefix(tail, "#") {
							return nil, &DotEnvError{file, lineNo, "unexpected text after the quoted value of " + key}
						}
						closed = true
						break
					}
					b.WriteByte(c)
				}
				if closed {
					break
				}
				i++
				if i >= len(lines) {
					return nil, &DotEnvError{file, start, "unterminated double-quoted value of " + key}
				}
				lineNo = i + 1
				b.WriteByte('\n')
				s = lines[i]
			}
			out[key] = b.String()
		default:
			if j := strings.Index(val, " #"); j >= 0 {
				val = val[:j]
			} else if j := strings.Index(val, "\t#"); j >= 0 {
				val = val[:j]
			}
			out[key] = strings.TrimSpace(val)
		}
	}
	return out, nil
}

// ReadDotEnv reads DIR/.env. A missing file is no variables and no error.
func ReadDotEnv(dir string) (map[string]string, error) {
	p := filepath.Join(dir, DotEnvFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return ParseDotEnv(p, string(b))
}

// EnvLookup returns a lookup that reads the process environment first, then
// the given .env variables.
func EnvLookup(dotenv map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if v, ok := os.LookupEnv(name); ok {
			return v, true
		}
		v, ok := dotenv[name]
		return v, ok
	}
}

// envRef matches a ${NAME} reference.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// ExpandRefs replaces every ${NAME} in s with lookup's value of NAME, and
// returns the first NAME lookup did not find ("" when every one was found;
// its reference is replaced by "").
func ExpandRefs(s string, lookup func(string) (string, bool)) (out, unset string) {
	out = envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		v, ok := lookup(name)
		if !ok && unset == "" {
			unset = name
		}
		return v
	})
	return out, unset
}
