package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"loopx/store"
)

// Error codes in the "code" member of an error body. The CLI maps them to exit codes.
const (
	CodeBadRequest      = "bad_request"     // malformed request: JSON, header, path (400)
	CodeUnauthenticated = "unauthenticated" // no or unknown bearer token (401)
	CodeForbidden       = "forbidden"       // the caller may not do this (403)
	CodeNotFound        = "not_found"       // the named row does not exist (404)
	CodeConflict        = "conflict"        // the state changed under the caller (409)
	CodeRefused         = "refused"         // the state does not allow it (409)
	CodeFull            = "full"            // a bound was reached (409)
	CodeTooLarge        = "too_large"       // body over the limit (413)
	CodeInvalid         = "invalid"         // a field breaks a rule (422)
	CodeUnavailable     = "unavailable"     // the database cannot be reached; retry (503)
	CodeInternal        = "internal"        // the server failed (500)
)

// Error is the body of every non-2xx answer: {"error": {...}}.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
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

func badRequest(field, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

func invalid(field, format string, args ...any) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Code: CodeInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}

func forbidden(format string, args ...any) *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: fmt.Sprintf(format, args...)}
}

// fromErr maps an operation's error to an API error. Errors that are not store sentinels
// are internal: their text is logged, not shown.
func fromErr(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	if store.IsUnavailable(err) {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: "the database is unavailable; retry in a few seconds (Retry-After)"}
	}
	var se *store.Error
	field, msg := "", err.Error()
	if errors.As(err, &se) {
		field, msg = se.Field, se.Msg
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Field: field, Message: msg}
	case errors.Is(err, store.ErrInvalid):
		return &Error{Status: http.StatusUnprocessableEntity, Code: CodeInvalid, Field: field, Message: msg}
	case errors.Is(err, store.ErrConflict):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Field: field, Message: msg}
	case errors.Is(err, store.ErrRefused):
		// A gate answer by someone who is not an owner is refused by the store (and audited
		// there); to the caller that is a permission failure.
		if field == "answered_by" {
			return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Field: field, Message: msg}
		}
		return &Error{Status: http.StatusConflict, Code: CodeRefused, Field: field, Message: msg}
	case errors.Is(err, store.ErrFull):
		return &Error{Status: http.StatusConflict, Code: CodeFull, Field: field, Message: msg}
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error; the server log has the details"}
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

// retryAfterSeconds is what a 503 asks clients and load balancers to wait.
const retryAfterSeconds = "2"

func writeError(w http.ResponseWriter, e *Error) {
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	writeJSON(w, e.Status, ErrorBody{Error: e})
}
