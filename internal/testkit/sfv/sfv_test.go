package sfv

import "testing"

// TestParseList pins the parser down on values of RFC 9651's own
// examples and on what it must refuse, so that a header it accepts is one
// a real parser accepts.
func TestParseList(t *testing.T) {
	good := map[string]int{
		`"burst";q=100;w=60, "daily";q=1000;w=86400`: 2,
		`"default";r=50;t=30`:                        1,
		`sugar, tea, rum`:                            3,
		`1;a;b=?0;c=-5;d=4.5;e="x\"y"`:               1,
		``:                                           0,
	}
	for field, n := range good {
		items, err := ParseList(field)
		if err != nil || len(items) != n {
			t.Errorf("ParseList(%q) = %d items, %v; want %d", field, len(items), err, n)
		}
	}
	for _, field := range []string{`"a";Q=1`, `"a",`, `"a" "b"`, `"unterminated`, `1234567890123456`, `"a";q=1.2345`, `"é"`, `(a b)`, `"a";q=`, `"a\n"`} {
		if items, err := ParseList(field); err == nil {
			t.Errorf("ParseList(%q) = %+v, want an error", field, items)
		}
	}
}
