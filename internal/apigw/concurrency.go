package apigw

import "github.com/slidegate/slidegate/pkg/httplimit"

// Admission is the answer of the API function's in-flight limits
// (RATE_LIMIT_CONCURRENCY) for one request: httplimit.Admission.
type Admission = httplimit.Admission
