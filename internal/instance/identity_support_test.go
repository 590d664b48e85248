package instance_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/holdgate"
)

// holdGate is the shared test gate (internal/testkit/holdgate).
type holdGate = holdgate.Gate

func newHoldGate() *holdGate { return holdgate.New() }

// idJWKS serves one RSA key as a JWKS, behind a hold gate.
type idJWKS struct {
	gate *holdGate
	key  *rsa.PrivateKey
	kid  string
	url  string
}

func startIDJWKS(t testing.TB) *idJWKS {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	j := &idJWKS{gate: newHoldGate(), key: key, kid: "id-rsa-1"}
	b64 := base64.RawURLEncoding.EncodeToString
	doc, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": j.kid, "use": "sig", "n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if j.gate.Pass(r) {
			_, _ = w.Write(doc)
		}
	}))
	t.Cleanup(srv.Close)
	j.url = srv.URL
	return j
}

// idRuntime builds a runtime in-process; its JSON log goes to the returned
// buffer.
func idRuntime(t testing.TB, env map[string]string, opts instance.Options) (*instance.Runtime, *testkit.Buffer) {
	t.Helper()
	logs := &testkit.Buffer{}
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	rt, err := instance.NewRuntime(context.Background(), func(k string) string { return env[k] }, opts)
	if err != nil {
		t.Fatalf("new runtime: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt, logs
}

// The issuer and audience of the tokens of the identity tests (those of
// the test events in events/).
const (
	idIssuer   = "https://auth.example.com/"
	idAudience = "slidegate-example"
)
