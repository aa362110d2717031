// Package fleet routes questions across engine nodes and System One
// upstreams: it resolves a model id to the nodes that serve it, checks a
// request's engine calls against each node's budget, picks a node by
// priority, state affinity and load, asks it through its Backend, fails
// over off nodes that refuse, time out, are busy or answer garbage, cools
// failing nodes down, and probes them in the background. It is the only
// package that talks to engines. What the answer means to a caller
// (calibration, the class of a failure, the record) is package answer's.
//
// The files, in the order of a request:
//
//	router.go       Router, Options, New: the nodes, aliases, limits, catalog
//	decide.go       Router.Decide, top-down: budget, node order, asking, blame, why no node
//	backend.go      Backend: an engine dialect or a System One upstream, and what a call costs
//	corrections.go  debias (orders of the options) and prior (batch, content-free) as the fleet reads them
//	node.go         Node, NewNode, FromConfig: a configured node, its models and State
//	health.go       Policy: cooldowns, probes, pings, the fleet's status
//	constraint.go   whether a constrained node holds its first token to the labels
//	slots.go        each node's slots: a call holds one while it runs, a request at most half
package fleet
