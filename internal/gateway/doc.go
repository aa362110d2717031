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
// A request is parsed with every problem named, in field order; each
// link of the chain is asked through the answer path within its option
// limit; the first link that answers decides, an answer under the
// threshold abstains, and an answer is graded act, ask or escalate
// against the gate its calibration fit suggests, else the threshold. A batch is one question over many
// contexts, each decided as a request of its own. The pause, Health and
// Capabilities of the chain, and the JSON Schemas of the contract and of
// the MCP tools' results are here too, so that every face publishes the
// same ones.
package gateway

//go:generate go run ./schemagen -out ../../schema
