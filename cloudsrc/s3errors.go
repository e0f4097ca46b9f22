package cloudsrc

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	smithy "github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func crc32New() hash.Hash32 { return crc32.New(castagnoli) }

// errNoSuchKey marks an S3 object that does not exist, so that Error.Fatal
// skips it as it skips a missing Cloud Storage object.
var errNoSuchKey = errors.New("no such key")

// s3Retryable reports whether an S3 request that failed with err is worth
// another try: what the SDK's standard retryer retries (5xx, 429 and the
// throttling codes such as SlowDown, connection errors), a conditional
// write that met a concurrent one (409 ConditionalRequestConflict, which
// S3 asks to retry), and a connection that ended a reply early.
func s3Retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary {
		return true
	}
	return apiCode(err) == "ConditionalRequestConflict" || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// apiCode is the S3 error code of err ("NoSuchKey", "SlowDown"), "" if
// it is no S3 answer.
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// isStatus reports whether err is an S3 answer with HTTP status code.
func isStatus(err error, code int) bool {
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == code
}

// s3RetryAfter is the Retry-After header of a 429 or 503 S3 answer.
func s3RetryAfter(err error) (string, bool) {
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil {
		return "", false
	}
	if c := re.HTTPStatusCode(); c != http.StatusTooManyRequests && c != http.StatusServiceUnavailable {
		return "", false
	}
	return re.Response.Header.Get("Retry-After"), true
}

const awsLoginHint = `run "aws configure" (or "aws sso login"), or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE; for MinIO or R2 also set AWS_ENDPOINT_URL`

// s3Err turns an SDK error into an Error that names the fix, as gcsErr
// does for Cloud Storage. write selects the permissions to ask for on 403.
func s3Err(uri, bucket string, write bool, err error) error {
	again := func(err error) error { return s3Err(uri, bucket, write, err) }
	if w, ok := commonErr(uri, err, "S3", again); ok {
		return w
	}
	if errors.Is(err, errCorrupt) {
		return &Error{URI: uri, Err: err, Msg: firstLine(err.Error())}
	}
	code := apiCode(err)
	var status int
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	msg := strings.ToLower(err.Error())
	switch {
	case code == "NoSuchBucket":
		return &Error{URI: uri, Code: 404, Err: err, Msg: fmt.Sprintf("bucket %q does not exist (check the name in s3://%s/..., and AWS_ENDPOINT_URL for MinIO or R2)", bucket, bucket)}
	case code == "NoSuchKey" || status == 404 && code == "NotFound":
		return &Error{URI: uri, Code: 404, Err: errors.Join(errNoSuchKey, err), Msg: "object does not exist"}
	case strings.Contains(msg, "failed to retrieve credentials") || strings.Contains(msg, "no ec2 imds role found") || strings.Contains(msg, "static credentials are empty"):
		return &Error{URI: uri, Err: err, Msg: "no AWS credentials found: " + awsLoginHint}
	case status == http.StatusMovedPermanently || code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed" && strings.Contains(msg, "region"):
		return &Error{URI: uri, Code: status, Err: err, Msg: fmt.Sprintf("bucket %q is in another region: set AWS_REGION to the bucket's region", bucket)}
	case status == http.StatusForbidden || code == "AccessDenied" || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch":
		m := fmt.Sprintf("permission denied (403 %s): allow s3:ListBucket and s3:GetObject on bucket %s to these credentials, or %s", code, bucket, awsLoginHint)
		if write {
			m = fmt.Sprintf("permission denied (403 %s): the destination needs s3:ListBucket, s3:GetObject, s3:PutObject and s3:DeleteObject (prep lists, writes and deletes there) on bucket %s: allow them to these credentials, or %s", code, bucket, awsLoginHint)
		}
		return &Error{URI: uri, Code: 403, Err: err, Msg: m}
	case status != 0:
		var ae smithy.APIError
		text := http.StatusText(status)
		if errors.As(err, &ae) && ae.ErrorMessage() != "" {
			text = code + ": " + firstLine(ae.ErrorMessage())
		}
		return &Error{URI: uri, Code: status, Err: err, Msg: fmt.Sprintf("%d %s", status, text)}
	}
	return &Error{URI: uri, Err: err, Msg: firstLine(cause(err).Error())}
}
