// Package truncate bounds text before it is quoted: a value a caller or an
// operator chose (a path, a header, a configuration value), or text long
// by accident (an error), in a log line, a metric property or an error
// message. It is the product's one helper for that job; pkg/ratelimit,
// which imports nothing of the product, keeps its own.
package truncate

// QuotedLen is the bound of a value quoted in an error message: enough to
// recognise it, never a flood.
const QuotedLen = 80

// Text is s cut to at most n bytes, then "..." when it was longer. A cut
// may fall inside a multi-byte character; the log and error encoders
// that print it escape what is not valid UTF-8.
func Text(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
