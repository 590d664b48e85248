package tests

// withEnv returns env with more's entries added (more wins).
func withEnv(env, more map[string]string) map[string]string {
	out := make(map[string]string, len(env)+len(more))
	for k, v := range env {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// Two identity hash keys of the tests (at least 32 bytes each), and the
// ARN of the secret that holds one.
const (
	hkKeyA = "slidegate-test-identity-hash-key-A-0001"
	hkARN  = "arn:aws:secretsmanager:us-east-1:123456789012:secret:identity-hash-key-MnOpQr"
)
