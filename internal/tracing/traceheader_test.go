package tracing

import (
	"encoding/hex"
	"strings"
	"testing"
)

func TestParseTraceHeader(t *testing.T) {
	const (
		root   = "1-5759e988-bd862e3fe1be46a994272793"
		parent = "53995c3f42cd8ad8"
		w3c    = "5759e988bd862e3fe1be46a994272793"
	)
	valid := []struct {
		name, header string
		sampled      bool
	}{
		{"Lambda's header, sampled", "Root=" + root + ";Parent=" + parent + ";Sampled=1", true},
		{"not sampled", "Root=" + root + ";Parent=" + parent + ";Sampled=0", false},
		{"decision left to the receiver", "Root=" + root + ";Parent=" + parent + ";Sampled=?", false},
		{"no Sampled", "Root=" + root + ";Parent=" + parent, false},
		{"other order, spaces, Lineage, trailing ;", " Sampled=1 ; Lineage=a87bd80c:1|68fd508a:5 ;Parent=" + parent + "; Root=" + root + ";", true},
	}
	for _, tc := range valid {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := parseTraceHeader(tc.header)
			if !ok {
				t.Fatalf("parseTraceHeader(%q) refused it", tc.header)
			}
			if got := hex.EncodeToString(h.traceID[:]); got != w3c {
				t.Errorf("trace ID %s, want %s", got, w3c)
			}
			if got := hex.EncodeToString(h.parentID[:]); got != parent {
				t.Errorf("parent %s, want %s", got, parent)
			}
			if h.sampled != tc.sampled {
				t.Errorf("sampled %v, want %v", h.sampled, tc.sampled)
			}
		})
	}
	invalid := map[string]string{
		"empty":              "",
		"no parent":          "Root=" + root + ";Sampled=1",
		"no root":            "Parent=" + parent + ";Sampled=1",
		"root twice":         "Root=" + root + ";Root=1-5759e988-bd862e3fe1be46a994272794;Parent=" + parent + ";Sampled=1",
		"parent twice":       "Root=" + root + ";Parent=" + parent + ";Parent=53995c3f42cd8ad9;Sampled=1",
		"sampled twice":      "Root=" + root + ";Parent=" + parent + ";Sampled=1;Sampled=0",
		"sampled yes":        "Root=" + root + ";Parent=" + parent + ";Sampled=yes",
		"version 2":          "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=" + parent + ";Sampled=1",
		"uppercase hex":      "Root=1-5759E988-BD862E3FE1BE46A994272793;Parent=" + parent + ";Sampled=1",
		"short root":         "Root=1-5759e988-bd862e3fe1be46a99427279;Parent=" + parent + ";Sampled=1",
		"root without dash":  "Root=1-5759e988bd862e3fe1be46a994272793;Parent=" + parent + ";Sampled=1",
		"long parent":        "Root=" + root + ";Parent=" + parent + "0;Sampled=1",
		"non-hex parent":     "Root=" + root + ";Parent=53995c3f42cd8adg;Sampled=1",
		"zero trace ID":      "Root=1-00000000-000000000000000000000000;Parent=" + parent + ";Sampled=1",
		"zero parent":        "Root=" + root + ";Parent=0000000000000000;Sampled=1",
		"field without =":    "Root=" + root + ";Parent=" + parent + ";Sampled",
		"W3C traceparent":    "00-" + w3c + "-" + parent + "-01",
		"lowercase key root": "root=" + root + ";Parent=" + parent + ";Sampled=1",
	}
	for name, header := range invalid {
		t.Run(name, func(t *testing.T) {
			if h, ok := parseTraceHeader(header); ok {
				t.Errorf("parseTraceHeader(%q) = %+v, want it refused", header, h)
			}
		})
	}
}

// FuzzParseTraceHeader: any header parses without a panic, and one that
// parses says exactly what the canonical header of its fields says.
func FuzzParseTraceHeader(f *testing.F) {
	f.Add("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	f.Add("Sampled=?;Root=1-5759e988-bd862e3fe1be46a994272793;Lineage=x:1;Parent=53995c3f42cd8ad8")
	f.Add("Root=1-00000000-000000000000000000000000;Parent=0000000000000000")
	f.Add(";;=;Root=;Parent")
	f.Fuzz(func(t *testing.T, header string) {
		h, ok := parseTraceHeader(header)
		if !ok {
			if h != (traceHeader{}) {
				t.Fatalf("refused %q but returned %+v", header, h)
			}
			return
		}
		id := hex.EncodeToString(h.traceID[:])
		sampled := "0"
		if h.sampled {
			sampled = "1"
		}
		canonical := "Root=1-" + id[:8] + "-" + id[8:] + ";Parent=" + hex.EncodeToString(h.parentID[:]) + ";Sampled=" + sampled
		if !strings.Contains(header, id[:8]+"-"+id[8:]) || !strings.Contains(header, hex.EncodeToString(h.parentID[:])) {
			t.Fatalf("%q parsed to IDs it does not hold: %s", header, canonical)
		}
		if again, ok := parseTraceHeader(canonical); !ok || again != h {
			t.Fatalf("%q parsed to %+v, its canonical form %q to %+v, %v", header, h, canonical, again, ok)
		}
	})
}
