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
// A request's answer carries what stands behind it: the steps applied to
// each question's reading (debias, prior, a fit's temperature), the
// engine's usage, the build that answered, and, for a question whose
// answer does not clear its Gate, a Refusal that says why the service will
// not stand behind it. A batch is many states under one set of questions,
// each answered exactly as a request of that state alone, and Throughput
// marks row-wise work (a batch, a job's rows): one state among many that
// keep the engines' slots busy.
//
// A Cascade is a model made of others, answered here once for every face:
// each question asked of the first stage, kept when its calibrated
// confidence clears the threshold certified for that stage's build, and
// the rest asked of the next stage together.
//
// Admit is the front door every face calls before an answer: the model
// resolved, its nodes' lists read once when no node is known to serve it,
// and its limits. Off the request path: a Cache answers exact repeats (the model's
// build, the steps and the fits in its key), a Recorder writes one
// decision-log record per answered question, and a Shadow asks a sampled
// share of the answered requests of a candidate model.
package answer
