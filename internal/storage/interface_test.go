package storage

import "testing"

func TestPrefixEnd(t *testing.T) {
	for prefix, want := range map[string]string{
		"/a":         "/b",
		"/a\xff":     "/b",
		"/\xff\xff":  "0",
		"/registry/": "/registry0",
	} {
		if got, ok := PrefixEnd(prefix); !ok || got != want {
			t.Errorf("PrefixEnd(%q) = %q, %v, want %q", prefix, got, ok, want)
		}
	}
	for _, prefix := range []string{"", "\xff\xff"} {
		if got, ok := PrefixEnd(prefix); ok {
			t.Errorf("PrefixEnd(%q) = %q, want none", prefix, got)
		}
	}
}
