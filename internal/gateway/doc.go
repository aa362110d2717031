// Package gateway is the System 1 gateway: one decision among options (or
// yes or no), asked of a chain of models that the fleet serves, in order,
// with a confidence that is the decision's own probability after
// calibration, an honest abstention when that is under the threshold, and
// never a made-up number. Its request and response types are the
// published contract (schema version "1"); the MCP server, the HTTP route
// POST /v1/decide and the decide command are faces over it. It talks to no
// engine and builds no fleet: each link of the chain asks the answer path
// it is given (package answer), the one /v1/systemone takes, and the
// gateway decides, abstains or grades by what comes back.
//
// The files:
//
//	contract.go  the decide request and response, their limits and codes: the published contract
//	request.go   ParseRequest: every problem of a request named, in field order
//	gateway.go   Options, New, Decide: the pause, the chain asked in order, abstention and grading
//	link.go      one link of the chain: its option limit, its ask through the answer path, its probe
//	provider.go  the query a link asks and the reading it gets back; the provider kinds
//	health.go    Health and Capabilities of the chain
//	schema.go    the JSON Schemas of the contract and of the MCP tools' results
package gateway

//go:generate go run ./schemagen -out ../../schema
