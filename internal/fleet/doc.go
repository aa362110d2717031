// Package fleet routes questions across engine nodes and System One
// upstreams: it resolves a model id to the nodes that serve it, checks a
// request's engine calls against each node's budget, picks a node by
// priority, state affinity and load, asks it through its Backend, fails
// over off nodes that refuse, time out, are busy or answer garbage, cools
// failing nodes down, and probes them in the background. It is the only
// package that talks to engines. What the answer means to a caller
// (calibration, the class of a failure, the record) is package answer's.
//
// A node has one Backend: an engine dialect (llama.cpp, Ollama, an
// OpenAI-compatible server), a System One upstream or a Decisions
// endpoint, so that every node fails over, cools down and honours
// Retry-After by one rule. A request is checked against each node's
// budget of engine calls before any is made; a node's slots bound the
// calls it runs at once, and a request holds at most half of them. The
// fleet reads a request's corrections (debias over orders of the
// options, a prior divided out) as the engines must be asked for them,
// tells which build each node serves by its fingerprint, and holds a
// constrained node to its first token being one of the labels.
package fleet
