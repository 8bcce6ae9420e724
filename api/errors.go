package api

// Error codes of the server's own routes; the session's (session.Code...)
// cover the rest.
const (
	codeInvalidAPIKey = "invalid_api_key"
	codeNotFound      = "not_found"
	codeMethod        = "method_not_allowed"
)
