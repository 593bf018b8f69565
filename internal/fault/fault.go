// Package fault is the application's error: a code that names the case,
// which app/http answers with a status and a message (its own, when the
// error carries them, else its table's), and a text for logs and the
// command line. Field errors, Laravel's 422, are a
// *Fields. Every package may import it: it imports nothing of the module.
package fault

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Error is an application error. Sentinels are *Error values, so errors.Is
// tells them apart; the code is what the HTTP layer maps, never the text.
type Error struct {
	// Code names the case in snake_case (domain_taken): app/http's table
	// key, and the class an intent's attempt history records.
	Code string
	// Message is for logs and the command line; an answer's message is
	// app/http's, unless Status is set.
	Message    string
	RetryAfter time.Duration // the answer's Retry-After, when the case knows it
	// Status, when set, is the answer's HTTP status, and Message its
	// message as it is: a case whose answer needs nothing but these is
	// declared where it is raised, not in app/http's table.
	Status int
}

// New is an error with that code and text.
func New(code, message string) *Error { return &Error{Code: code, Message: message} }

// Answer is an error that is its own answer: that status, code and message.
func Answer(status int, code, message string) *Error {
	return &Error{Code: code, Message: message, Status: status}
}

func (e *Error) Error() string { return e.Message }

// Code is the code of the first *Error in err's chain; "" when there is none.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Fields is Laravel's validation failure: each failed field's messages, and
// the fields in rule order (which a map cannot keep). The zero value is
// ready to use.
type Fields struct {
	Fields map[string][]string
	Order  []string // the fields of Fields in rule order; fields it does not name follow, sorted
}

// ClassInvalidInput is the class an intent's attempt history records for
// a *Fields.
const ClassInvalidInput = "invalid_input"

// Add notes msg on field, keeping the order fields first failed in.
func (f *Fields) Add(field, msg string) {
	if f.Fields == nil {
		f.Fields = map[string][]string{}
	}
	if _, ok := f.Fields[field]; !ok {
		f.Order = append(f.Order, field)
	}
	f.Fields[field] = append(f.Fields[field], msg)
}

// Err is f when it holds a failure, else nil.
func (f *Fields) Err() error {
	if len(f.Fields) == 0 {
		return nil
	}
	return f
}

// Error is every message, by field sorted (each names its field).
func (f *Fields) Error() string {
	var msgs []string
	for _, field := range slices.Sorted(maps.Keys(f.Fields)) {
		msgs = append(msgs, f.Fields[field]...)
	}
	return "invalid input: " + strings.Join(msgs, " ")
}

// Keys is the fields with errors: Order's first, then the rest sorted.
func (f *Fields) Keys() []string {
	keys := make([]string, 0, len(f.Fields))
	for _, k := range f.Order {
		if _, ok := f.Fields[k]; ok && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(f.Fields)) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// Message is Laravel's message of the failure: the first field's first
// message, then "(and N more errors)" for the others.
func (f *Fields) Message() string {
	msg, more := "The given data was invalid.", -1
	for _, k := range f.Keys() {
		for _, m := range f.Fields[k] {
			if more < 0 {
				msg = m
			}
			more++
		}
	}
	switch {
	case more == 1:
		msg += " (and 1 more error)"
	case more > 1:
		msg += fmt.Sprintf(" (and %d more errors)", more)
	}
	return msg
}

// FieldErrors is the messages by field, for the operator console's forms,
// which read them through an interface of their own.
func (f *Fields) FieldErrors() map[string][]string { return f.Fields }

// FieldOrder is Order, for the operator console's forms.
func (f *Fields) FieldOrder() []string { return f.Order }
