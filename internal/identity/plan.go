package identity

import "strings"

// MaxPlanLen is the longest plan name.
const MaxPlanLen = 64

// NormalizePlan returns a plan name in the one form plans are compared in:
// trimmed and lower-cased, 1 to MaxPlanLen ASCII letters, digits and
// underscores (the characters an API Gateway stage variable name allows, so
// that every plan can have a stage variable). ok is false for anything
// else, which names no plan.
func NormalizePlan(s string) (plan string, ok bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > MaxPlanLen {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return "", false
		}
	}
	return strings.ToLower(s), true
}
