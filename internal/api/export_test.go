package api

// StatusOf is statusOf, for the OpenAPI test: every code's status must be
// the one openapi.json gives.
var StatusOf = statusOf
