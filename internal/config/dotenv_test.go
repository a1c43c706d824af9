package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseDotEnv(t *testing.T) {
	text := "\ufeff# payments\n" +
		"PAYMENTS_TOKEN=tok_live_123\n" +
		"export REGION = eu-west-1   # the region\n" +
		"SINGLE='a #b \\n $X'\n" +
		"DOUBLE=\"line1\\nline2 \\\"q\\\" \\\\\" # c\n" +
		"PEM=\"-----BEGIN-----\r\nabc\n-----END-----\"\n" +
		"EMPTY=\n" +
		"HASH=a#b\n" +
		"\n   \n" +
		"PAYMENTS_TOKEN=tok_live_456\n"
	got, err := ParseDotEnv(".env", text)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"PAYMENTS_TOKEN": "tok_live_456", // a later line wins
		"REGION":         "eu-west-1",
		"SINGLE":         `a #b \n $X`,
		"DOUBLE":         "line1\nline2 \"q\" \\",
		"PEM":            "-----BEGIN-----\nabc\n-----END-----",
		"EMPTY":          "",
		"HASH":           "a#b",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
}

func TestParseDotEnvErrorsNameTheLineNotTheValue(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"A=1\nnot a pair\n", ".env:2: expected KEY=VALUE"},
		{"1BAD=secret-value-1\n", `.env:1: "1BAD" is not a valid variable name`},
		{"MY-KEY=secret-value-1\n", `.env:1: "MY-KEY" is not a valid variable name`},
		{"A='secret-value-1\n", ".env:1: unterminated single-quoted value of A"},
		{"\nA=\"secret-value-1\nmore\n", ".env:2: unterminated double-quoted value of A"},
		{"A=\"secret-value-1\" tail\n", ".env:1: unexpected text after the quoted value of A"},
	} {
		_, err := ParseDotEnv(".env", tc.text)
		var de *DotEnvError
		if !errors.As(err, &de) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.text, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "secret-value") {
			t.Errorf("%q: the error shows the value: %v", tc.text, err)
		}
	}
}

func TestEnvLookupProcessEnvironmentWins(t *testing.T) {
	dir := t.TempDir()
	if vars, err := ReadDotEnv(dir); err != nil || len(vars) != 0 {
		t.Fatalf("no .env: %v %v", vars, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("SB_DOTENV_A=from-file\nSB_DOTENV_B=from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SB_DOTENV_A", "from-process")
	vars, err := ReadDotEnv(dir)
	if err != nil {
		t.Fatal(err)
	}
	look := EnvLookup(vars)
	for name, want := range map[string]string{"SB_DOTENV_A": "from-process", "SB_DOTENV_B": "from-file"} {
		if v, ok := look(name); !ok || v != want {
			t.Errorf("%s = %q %v, want %q", name, v, ok, want)
		}
	}
	if _, ok := look("SB_DOTENV_UNSET"); ok {
		t.Error("an unset name must not be found")
	}
}
