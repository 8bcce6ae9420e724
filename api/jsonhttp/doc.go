// Package jsonhttp is JSON on the HTTP wire, as every protocol package of
// the API speaks it: request bodies read as one JSON object whose members
// are taken field by field (a wrong type or an unknown member is reported
// with the field's name), responses written as JSON, and streams written as
// server-sent events or newline-delimited JSON. Errors are *session.Error
// values, which each protocol then shapes its own way.
package jsonhttp
