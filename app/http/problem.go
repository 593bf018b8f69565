package http

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// problemMediaType is RFC 9457's media type for problem details.
const problemMediaType = "application/problem+json"

// problemTypeBase is the prefix of every code's problem type URI: the code
// with its underscores written as hyphens follows it
// (https://licensor.dev/problems/domain-taken). An error without a code is
// of type about:blank. docs/api.md lists them.
const problemTypeBase = "https://licensor.dev/problems/"

// problem is an error as RFC 9457 problem details: detail is the message
// Laravel's shape carries, and code and errors are the same extensions.
type problem struct {
	Type   string         `json:"type"`
	Title  string         `json:"title"`
	Status int            `json:"status"`
	Detail string         `json:"detail"`
	Code   string         `json:"code,omitempty"`
	Errors *orderedErrors `json:"errors,omitempty"`
}

// newProblem is e as problem details.
func newProblem(e *Error) problem {
	return problem{Type: problemType(e.Code), Title: problemTitle(e.Status), Status: e.Status, Detail: e.Message, Code: e.Code, Errors: e.Errors}
}

// problemType is the type URI of a code's problem: about:blank for none.
func problemType(code string) string {
	if code == "" {
		return "about:blank"
	}
	return problemTypeBase + strings.ReplaceAll(code, "_", "-")
}

// problemTitle is the status's reason phrase, as RFC 9457 asks of
// about:blank and as every type here uses.
func problemTitle(status int) string {
	if status == 499 {
		return "Client Closed Request"
	}
	if t := http.StatusText(status); t != "" {
		return t
	}
	return "Error"
}

// wantsProblem reports whether the Accept header values ask for problem
// details: application/problem+json named with a quality above 0 and not
// below that of application/json, when that is named too. Wildcards
// (*/*, application/*) choose nothing: they get Laravel's shape.
func wantsProblem(accept []string) bool {
	problemQ, jsonQ := -1.0, -1.0
	for _, v := range accept {
		for _, r := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(r))
			if err != nil {
				continue
			}
			q := 1.0
			if s, ok := params["q"]; ok {
				f, err := strconv.ParseFloat(s, 64)
				if err != nil || f < 0 || f > 1 {
					continue
				}
				q = f
			}
			switch mt {
			case problemMediaType:
				problemQ = max(problemQ, q)
			case "application/json":
				jsonQ = max(jsonQ, q)
			}
		}
	}
	return problemQ > 0 && problemQ >= jsonQ
}
