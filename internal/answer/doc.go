// Package answer is system1's one answer path. Every face that answers
// questions calls Service.Answer: POST /v1/systemone (package httpapi),
// each link of the decide chain (package gateway, for POST /v1/decide,
// the MCP tool and the CLI), and any wire to come. One call asks the
// fleet, checks what came back, calibrates it with one snapshot of the
// fits, names every step applied, and records each answered question in
// the decision log; or it returns a *Failure whose Class and RetryAfter a
// face only maps to its own status. A face never repeats the sequence.
//
// Node errors name the nodes' addresses; a Failure's messages have them
// taken out (package redact) for every caller that reaches a face over
// the network. Options.Local keeps them for the faces whose caller runs
// system1 itself and configured its nodes: the MCP server over stdio and
// the command line.
//
// The files, in the order of a request:
//
//	admit.go    Admit: the front door (a model's limits, its nodes' lists read once); the fleet's views a face shows
//	answer.go   Options, Service, Request, Answer: the sequence itself
//	report.go   the steps after the engine (debias, prior, temperature), usage, warnings
//	failure.go  Class, Classify, Failure: what a face maps to its status; redaction
//	record.go   Recorder: one decisionlog.Record per answered question
//	shadow.go   Shadow: a sampled share of answered requests asked of a candidate off the request path
package answer
