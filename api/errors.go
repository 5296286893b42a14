package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"loopx/store"
)

// Error codes in the "code" member of an error body: the codes of the table of error kinds
// (store.ErrorKinds), which also gives each its HTTP status and the CLI's exit code. They are
// named here for the API's clients (api/client speaks this package only).
const (
	CodeBadRequest      = store.CodeBadRequest      // malformed request: JSON, header, path
	CodeUnauthenticated = store.CodeUnauthenticated // no or unknown bearer token
	CodeForbidden       = store.CodeForbidden       // the caller may not do this
	CodeNotFound        = store.CodeNotFound        // the named row does not exist
	CodeConflict        = store.CodeConflict        // the state changed under the caller
	CodeRefused         = store.CodeRefused         // the state does not allow it
	CodeFull            = store.CodeFull            // a bound was reached
	CodeTooLarge        = store.CodeTooLarge        // body over the limit
	CodeInvalid         = store.CodeInvalid         // a field breaks a rule
	CodeUnavailable     = store.CodeUnavailable     // the database cannot be reached; retry
	CodeInternal        = store.CodeInternal        // the server failed
)

// Error is the body of every non-2xx answer: {"error": {...}}. Reason, when set, is one of
// the store's Reason constants: which case of Code this is, for programs that act on it.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Message)
	}
	return e.Message
}

// ErrorBody is the JSON envelope of an Error.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// newError is an error of kind code, answered with the status the table gives that kind.
func newError(code, field, msg string) *Error {
	k, ok := store.KindByCode(code)
	if !ok {
		k, _ = store.KindByCode(CodeInternal)
	}
	return &Error{Status: k.Status, Code: k.Code, Field: field, Message: msg}
}

func badRequest(field, format string, args ...any) *Error {
	return newError(CodeBadRequest, field, fmt.Sprintf(format, args...))
}

func invalid(field, format string, args ...any) *Error {
	return newError(CodeInvalid, field, fmt.Sprintf(format, args...))
}

func notFound(field, format string, args ...any) *Error {
	return newError(CodeNotFound, field, fmt.Sprintf(format, args...))
}

// forbidden is a 403 with its reason ("" when none applies).
func forbidden(reason, msg string) *Error {
	e := newError(CodeForbidden, "", msg)
	e.Reason = reason
	return e
}

// fromErr maps an operation's error to an API error by the table of error kinds. Errors that
// are not store sentinels are internal: their text is logged, not shown.
func fromErr(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	k := store.KindOf(err)
	switch k.Code {
	case CodeUnavailable:
		return newError(k.Code, "", "the database is unavailable; retry in a few seconds (Retry-After)")
	case CodeInternal:
		return newError(k.Code, "", "internal error; the server log has the details")
	}
	e := newError(k.Code, "", err.Error())
	var se *store.Error
	if errors.As(err, &se) {
		e.Field, e.Reason, e.Message = se.Field, se.Reason, se.Msg
	}
	return e
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"encode response"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, e *Error) {
	switch e.Status {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", store.RetryAfterSeconds)
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="loopx"`) // RFC 6750: the scheme a 401 asks for
	}
	writeJSON(w, e.Status, ErrorBody{Error: e})
}
