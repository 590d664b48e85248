package mototest

import (
	"errors"
	"net/http"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// sdkError is the error chain the SDK returns for a reply of the status
// whose body could not be read (deserialize true) or that said why the
// call failed (false).
func sdkError(status int, deserialize bool) error {
	var inner error = errors.New("BadRequestException: boom")
	if deserialize {
		inner = &smithy.DeserializationError{Err: errors.New("read tcp: use of closed network connection")}
	}
	return &smithy.OperationError{ServiceID: "API Gateway", OperationName: "CreateUsagePlanKey",
		Err: &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: inner}}}
}

// TestAnsweredUnreadIsOnlyALostSuccess: only a 2xx whose body was lost
// counts as made; a refusal, or a lost body of an error, still fails the
// fill.
func TestAnsweredUnreadIsOnlyALostSuccess(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{sdkError(201, true), true},
		{sdkError(200, true), true},
		{sdkError(400, false), false},
		{sdkError(500, true), false},
		{errors.New("dial tcp: connection refused"), false},
		{nil, false},
	} {
		if got := answeredUnread(c.err); got != c.want {
			t.Errorf("answeredUnread(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
