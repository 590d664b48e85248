//go:build !otel

package tracing

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"
)

// noopHandler is a lambda.Handler that answers nothing.
type noopHandler struct{}

func (*noopHandler) Invoke(context.Context, []byte) ([]byte, error) { return nil, nil }

// TestHandlerIsTheHandlerUnderXRay pins that X-Ray needs nothing around an
// invocation: Handler starts exactly the handler it is given.
func TestHandlerIsTheHandlerUnderXRay(t *testing.T) {
	var h lambda.Handler = &noopHandler{}
	if got := Handler(h); got != h {
		t.Fatalf("Handler(h) = %#v, want h itself", got)
	}
}
