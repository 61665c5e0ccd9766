// Package status owns the error kinds that cross the C boundary: every error the core or a
// backend returns can be classified into one Code, which the C ABI hands to Python as a
// number and Python maps to one exception class (never by parsing message text). An
// error about one configuration field carries the field as data (FieldError, FieldOf),
// which crosses beside the message and becomes Python's ConfigError.field.
//
// Errors are plain values; everything here is safe for concurrent use.
package status

import (
	"context"
	"errors"
	"fmt"
)

// Code classifies an error. The numbers are part of the C ABI (capi/focus.h): never renumber.
type Code int32

const (
	OK              Code = 0
	Internal        Code = 1 // a bug: a recovered Go panic or a broken invariant
	InvalidArgument Code = 2 // bad configuration, bad JSON, out-of-range values
	InvalidHandle   Code = 3 // zero, unknown, freed or wrongly typed handle
	Timeout         Code = 4 // a deadline passed
	Cancelled       Code = 5 // the caller cancelled the work
	Backend         Code = 6 // an inference server or value server misbehaved
	Collection      Code = 7 // a collection had failed branches (allow_partial=False)
	NotFound        Code = 8 // a file, model or tokenizer that was asked for is not there
)

var codeNames = map[Code]string{
	OK: "ok", Internal: "internal", InvalidArgument: "invalid argument",
	InvalidHandle: "invalid handle", Timeout: "timeout", Cancelled: "cancelled",
	Backend: "backend", Collection: "collection", NotFound: "not found",
}

func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("code(%d)", int32(c))
}

// Error is an error with a Code. It wraps an optional cause.
type Error struct {
	Code Code
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	if e.Err != nil && e.Msg != "" {
		return e.Msg + ": " + e.Err.Error()
	}
	if e.Err != nil {
		return e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Wrap attaches a code and a message to a cause; a nil cause gives nil.
func Wrap(code Code, err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Err: err}
}

// CodeOf classifies err: the outermost *Error decides; context errors map to Timeout and
// Cancelled; anything else is Internal, because an unclassified error is a bug to fix.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	case errors.Is(err, context.Canceled):
		return Cancelled
	}
	return Internal
}

// FieldError is a configuration value out of range: the field it is about, in the
// binding's spelling ("budget", "max_segments", "gamma"), and why. The C ABI hands the
// field to Python beside the message (ConfigError.field), so a caller can tell which
// argument was wrong without reading the text.
//
// Config, when set, names the configuration in the message: "search config budget: is 0,
// must be >= 1". Without it the error is "budget is 0, must be >= 1", for a caller whose
// own message names the configuration (FieldErrorf: "Selective: budget is 0, ...").
type FieldError struct {
	Config string
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Config == "" {
		return e.Field + " " + e.Reason
	}
	return e.Config + " " + e.Field + ": " + e.Reason
}

// FieldErrorf is a code-classified error about field: "<lead>: <field> <reason>" (or
// "<field> <reason>" when lead is ""), with the reason formatted.
func FieldErrorf(code Code, lead, field, format string, args ...any) error {
	return &Error{Code: code, Msg: lead, Err: &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}}
}

// FieldOf is the configuration field err is about: the outermost *FieldError's in its
// chain, or "" when it is about none.
func FieldOf(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}
