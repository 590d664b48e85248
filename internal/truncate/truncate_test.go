package truncate

import "testing"

func TestText(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc..."},
		{"abcd", 0, "..."},
	} {
		if got := Text(tt.s, tt.n); got != tt.want {
			t.Errorf("Text(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
