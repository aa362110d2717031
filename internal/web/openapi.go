package web

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/decisionsapi"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/outcomes"
	"system1/internal/systemone"
)

// The OpenAPI document describes the HTTP surface that system1 serve has.
// Where a route's body is a Go type (the decide contract, a node's state)
// its schema is inferred from that type, as schema/*.json are; the System
// One wire is parsed and written by hand in internal/systemone to keep
// key order, so its shapes are written out here, and the suite validates
// real replies of every route against this document to keep both honest.
// go generate writes the committed copy, schema/openapi.json; a test fails
// when it is stale.
//
//go:generate go run ./openapigen -out ../../schema/openapi.json

// OpenAPI returns the OpenAPI 3.1 document, indented with a final newline,
// as GET /openapi.json serves it and schema/openapi.json holds it.
func OpenAPI() []byte { return openAPI() }

var openAPI = sync.OnceValue(func() []byte {
	b, err := json.MarshalIndent(document(), "", "  ")
	if err != nil {
		panic(fmt.Sprintf("web: the OpenAPI document does not marshal: %v", err)) // our own values: a bug
	}
	return append(b, '\n')
})

type obj = map[string]any

// license is the SPDX identifier of the repository's LICENSE.
const license = "Apache-2.0"

func document() obj {
	return obj{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"info": obj{
			"title":   "system1",
			"version": gateway.SchemaVersion,
			"description": "A fast decision service: typed questions over a state, answered with calibrated " +
				"probabilities read from a language model's first-token log-probabilities. POST /v1/systemone " +
				"is TypeSafe's System One wire (Jev); POST /v1/decisions is OpenAI's Decisions wire over the same answers; " +
				"POST /v1/decide is the gateway's contract. With keys " +
				"configured every /v1 route needs one, as a bearer token or in X-Api-Key; a key may hold only some " +
				"scopes (decide, feedback, read, admin), and a route outside them is a 403 naming the scope it needs.",
			"license": obj{"name": license, "identifier": license},
		},
		// The API is at the root of the server that serves this document
		// (GET /openapi.json): system1 serve's listen address.
		"servers": []obj{{"url": "/", "description": "The server this document was fetched from."}},
		// A key when keys are configured; none when auth is off (the
		// empty requirement).
		"security": []obj{{"bearer": []string{}}, {"apiKey": []string{}}, {}},
		"paths":    paths(),
		"components": obj{
			"securitySchemes": obj{
				"bearer": obj{"type": "http", "scheme": "bearer"},
				"apiKey": obj{"type": "apiKey", "in": "header", "name": "X-Api-Key"},
			},
			"schemas": schemas(),
		},
	}
}

// costHeader documents X-System1-Cost, what what cost.
func costHeader(what string) obj {
	return obj{
		"description": "What " + what + " cost, in US dollars, as a decimal (0.000123): the tokens each answering node reported at its " +
			"configured price (nodes[].price), or its price per forwarded request; 0 for a decision cache hit, which asked no engine. " +
			"Absent when the cost is not known: some node that answered has no price.",
		"schema": obj{"type": "string", "pattern": `^[0-9]+(\.[0-9]+)?$`},
	}
}

func paths() obj {
	p := obj{
		"/v1/systemone": obj{"post": obj{
			"operationId": "systemOne",
			"summary":     "Answer typed questions over a state (the System One wire).",
			"description": "Each question is a choice (one key of its criteria, a distribution and a confidence), " +
				"a noul (P(true)) or a score (the expected level of an ordered rubric). A 200 carries every " +
				"question; otherwise nothing. Probabilities are rounded by largest remainder so they sum to 1.",
			"parameters":  append(gateHeaders(), coverageParam()),
			"requestBody": jsonBody("SystemOneRequest"),
			"responses": jevKeyed(bodyRead("", "Error", obj{
				"200": withHeaders(jsonReply("The answers, in question order.", "SystemOneResponse"), obj{
					"X-System1-Cache": obj{
						"description": "With the server's decision cache on (cache.entries): hit when the answers are those of an earlier, identical request " +
							"(state, questions, options, model and its nodes, steps and fits), served without asking an engine (usage is then 0); " +
							"miss when the engines answered and the answers were kept; bypass when they answered and were not kept (the batch prior). Absent when the cache is off.",
						"schema": obj{"type": "string", "enum": gateway.CacheStates},
					},
					"X-System1-Cost": costHeader("the answers"),
					"X-System1-Served": obj{
						"description": "What served the answers: the node, the model and the fingerprint of its build " +
							"(node=n1 model=m fingerprint=3f2a09c1d4e5b678, the fingerprint unknown where it was not probed yet), " +
							"per question (q1: node=...; q2: ...) when they differ. A calibration fit learnt on another build is not applied.",
						"schema": obj{"type": "string"},
					},
				}),
				"400": jsonReply("The body could not be read; or hosted Jev's api_usage_error: Jev 1.14's images (a non-empty assets or images, a box question, a multipart body), which this server does not read, refused before any engine call with detail.unsupported naming them; an unknown top-level field; an unknown model.", "Error"),
				"422": withHeaders(jsonReply("A malformed request: every problem listed; or a question system1 will not stand behind (type refused: the node declined, the model ranked none of its labels on every node, the none option won, too little label mass), since this wire has no refusal.", "ValidationError"),
					obj{"X-System1-Cost": costHeader("the refused answers (sent on a refusal, whose tokens were spent; a malformed request asked no engine and has none)")}),
				"429": jsonReply("The caller's key is over its rate, or its address sent too many wrong keys; or the key has spent its budget (type insufficient_quota, the message naming the budget); Retry-After says when to come back (for a budget, when its period resets).", "Error"),
				"503": jsonReply("A question got no answer.", "Error"),
			})),
		}},
		"/v1/decisions": obj{"post": obj{
			"operationId": "decisions",
			"summary":     "Answer ordered questions over an input (OpenAI's Decisions wire).",
			"description": "The same answers as POST /v1/systemone, in OpenAI's shapes: predicate (P(true)), choice (typed values) " +
				"and score (levels with labels), answered in question order with each question's name (null when unnamed). " +
				"A question system1 will not stand behind is a refusal while the others are answered; X-System1-Refused says why. " +
				"Errors are OpenAI's envelope; x-request-id is on every reply.",
			"parameters":  gateHeaders(),
			"requestBody": jsonBody("DecisionsRequest"),
			"responses": bodyRead("", "OpenAIError", obj{
				"200": withHeaders(jsonReply("The answers, in question order.", "DecisionsResponse"), obj{"X-System1-Cost": costHeader("the answers")}),
				"400": jsonReply("A problem with the request (param names the first, message lists all; code unsupported_input for an image), a header holding nonsense, or an engine that refused the request (param model for an engine that cannot serve decisions).", "OpenAIError"),
				"401": jsonReply("A key is configured and the caller's is missing or wrong (code invalid_api_key).", "OpenAIError"),
				"403": jsonReply("The caller's key does not hold the scope the route needs; the message names it (code missing_scope).", "OpenAIError"),
				"404": jsonReply("No node serves the model (code model_not_found, param model).", "OpenAIError"),
				"429": jsonReply("The caller's key is over its rate, or its address sent too many wrong keys (code rate_limit_exceeded); or the key has spent its budget (type and code insufficient_quota, the message naming the budget); retry-after and retry-after-ms say when to come back (for a budget, when its period resets).", "OpenAIError"),
				"503": jsonReply("No node answered (type server_error); retry-after and retry-after-ms when a node asked for a pause.", "OpenAIError"),
			}),
		}},
		"/v1/systemone/batch": obj{"post": obj{
			"operationId": "systemOneBatch",
			"summary":     "Answer one set of questions over many states (laya-serve's batch route).",
			"description": fmt.Sprintf("1 to %d states, one questions map. Each state is answered as POST /v1/systemone would "+
				"answer it alone, recorded under a request id of its own (request_ids, aligned with results), and the "+
				"usage is summed; the headers (debias, prior, gate, coverage) apply to each state as to a single request. "+
				"A state that is not answered, or has a question system1 will not stand behind, gets, in its place, the error "+
				"body its own request would have got, with that request's status (a refused state's 422). The batch is checked "+
				"whole first, as POST /v1/systemone checks a request (a 422 names a state's problem as states.N), and refused "+
				"whole, as its first state would be, when no state was answered for a reason that is not the caller's. It "+
				"counts against the caller's rate as its states do.", systemone.MaxBatchStates),
			"parameters":  append(gateHeaders(), coverageParam()),
			"requestBody": jsonBody("SystemOneBatchRequest"),
			"responses": jevKeyed(bodyRead("", "Error", obj{
				"200": withHeaders(jsonReply("Each state's response or error, in the states' order.", "SystemOneBatchResponse"), obj{"X-System1-Cost": costHeader("the states answered (a refused state's included)")}),
				"400": jsonReply("The body could not be read; or, as on POST /v1/systemone, Jev 1.14's images, an unknown top-level field or an unknown model, for the whole batch before any engine call.", "Error"),
				"422": jsonReply("A malformed batch or header: every problem listed.", "ValidationError"),
				"429": jsonReply("The caller's key is over its rate, or has spent its budget (type insufficient_quota; Retry-After: when its period resets).", "Error"),
				"503": jsonReply("No state was answered: none got an answer.", "Error"),
			})),
		}},
		"/v1/models": obj{"get": obj{
			"operationId": "models",
			"summary":     "List the models the nodes serve and the configured aliases, with what each can be asked.",
			"description": "In both shapes clients read: Jev's models list and OpenAI's, each entry with its capabilities in its wire's words.",
			"responses": obj{
				"200": jsonReply("The models.", "ModelList"),
				"401": jsonReply("A key is configured and the caller's is missing or wrong: OpenAI's envelope (code invalid_api_key) with Jev's detail beside it, since both wires' clients read the list.", "Error"),
				"429": jsonReply("The caller's key is over its rate: OpenAI's envelope (code rate_limit_exceeded) with Jev's detail beside it.", "Error"),
			},
		}},
		"/v1/models/{id}": obj{"get": obj{
			"operationId": "model",
			"summary":     "One model, as the list's data has it (OpenAI's models.retrieve).",
			"parameters": []obj{{"name": "id", "in": "path", "required": true, "description": "The model's id, URL-encoded.",
				"schema": obj{"type": "string"}}},
			"responses": obj{
				"200": jsonReply("The model.", "Model"),
				"401": jsonReply("A key is configured and the caller's is missing or wrong (code invalid_api_key), with Jev's detail beside it.", "Error"),
				"404": jsonReply("No node serves the model (code model_not_found, param model).", "OpenAIError"),
				"429": jsonReply("The caller's key is over its rate (code rate_limit_exceeded), with Jev's detail beside it.", "Error"),
			},
		}},
		"/v1/decide": obj{"post": obj{
			"operationId": "decide",
			"summary":     "Make one decision through the gateway, or abstain.",
			"description": "The same request and response as the MCP tool system1_decide. The status says the " +
				"outcome; the body is the response either way. Served when the gateway is configured.",
			"requestBody": jsonBody("DecideRequest"),
			"responses": bodyRead(" (error.code invalid_request)", "DecideResponse", obj{
				"200": jsonReply("Decided or abstained.", "DecideResponse"),
				"401": jsonReply("A key is configured and the caller's is missing or wrong (error.code unauthorized).", "DecideResponse"),
				"403": jsonReply("The caller's key does not hold the scope the route needs; the message names it (error.code forbidden).", "DecideResponse"),
				"400": jsonReply("The body could not be read (error.code invalid_request).", "DecideResponse"),
				"422": jsonReply("invalid_request.", "DecideResponse"),
				"429": jsonReply("The caller's key is over its rate, or its address sent too many wrong keys (error.code rate_limited); or the key has spent its budget (error.code over_budget, the message naming the budget); Retry-After says when to come back (for a budget, when its period resets).", "DecideResponse"),
				"502": jsonReply("provider_error or malformed_response.", "DecideResponse"),
				"503": jsonReply("config_error.", "DecideResponse"),
				"504": jsonReply("provider_timeout.", "DecideResponse"),
			}),
		}},
		"/v1/decide/batch": obj{"post": obj{
			"operationId": "decideBatch",
			"summary":     "Decide one question over many contexts.",
			"description": fmt.Sprintf("A decide request with contexts, 1 to %d context objects, in place of its context "+
				"and request_id. The batch is checked whole first (a 422 with error names each problem, a context's as "+
				"contexts[i]); then each context is decided as POST /v1/decide decides it alone, each result with a "+
				"request_id of its own. The status is what every result's would be when they agree, or the first's when "+
				"no context was answered and none failed as the caller's error, else 200. It counts "+
				"against the caller's rate as its contexts do. Served when the gateway is configured.", gateway.MaxBatchContexts),
			"requestBody": jsonBody("DecideBatchRequest"),
			"responses": bodyRead(" (error.code invalid_request)", "DecideBatchResponse", obj{
				"200": jsonReply("Each context's response, in the contexts' order.", "DecideBatchResponse"),
				"401": jsonReply("A key is configured and the caller's is missing or wrong (error.code unauthorized).", "DecideBatchResponse"),
				"403": jsonReply("The caller's key does not hold the scope the route needs; the message names it (error.code forbidden).", "DecideBatchResponse"),
				"400": jsonReply("The body could not be read (error.code invalid_request).", "DecideBatchResponse"),
				"422": jsonReply("invalid_request: the batch, refused whole.", "DecideBatchResponse"),
				"429": jsonReply("The caller's key is over its rate, or its address sent too many wrong keys (error.code rate_limited); or the key has spent its budget (error.code over_budget); Retry-After says when to come back (for a budget, when its period resets).", "DecideBatchResponse"),
				"502": jsonReply("No context was answered: the first's result is provider_error or malformed_response, and every other's a 5xx error too.", "DecideBatchResponse"),
				"503": jsonReply("No context was answered: the first's result is config_error (every context's, when the gateway is misconfigured), and every other's a 5xx error too.", "DecideBatchResponse"),
				"504": jsonReply("No context was answered: the first's result is provider_timeout, and every other's a 5xx error too.", "DecideBatchResponse"),
			}),
		}},
		"/health": obj{"get": obj{
			"operationId": "health",
			"summary":     "Whether the process serves, with each node's state.",
			"description": "Needs no key. With keys configured, a caller without one (or with a wrong one) gets the status and auth alone, without the version and the nodes.",
			"security":    []obj{{}},
			"responses":   obj{"200": jsonReply("Serving.", "Health")},
		}},
		"/livez": obj{"get": obj{
			"operationId": "livez",
			"summary":     "Liveness: 200 while the process serves.",
			"description": "Needs no key. Whatever the nodes and the decision log do: for a supervisor's liveness probe, which restarts a process that no longer answers.",
			"security":    []obj{{}},
			"responses":   obj{"200": jsonReply("Alive.", "Live")},
		}},
		"/readyz": obj{"get": obj{
			"operationId": "readyz",
			"summary":     "Readiness: whether to send this server traffic.",
			"description": "Needs no key. 503 until the decision log is open (or off by the configuration) and every model the " +
				"configuration names has a node that answered a health probe, then 200 without a restart; 503 again once " +
				"a shutdown begins, before the listeners close. With auth on, only a caller with a key gets each condition's detail.",
			"security": []obj{{}},
			"responses": obj{
				"200": jsonReply("Ready.", "Readiness"),
				"503": jsonReply("Not ready, or draining: the conditions not met.", "Readiness"),
			},
		}},
		"/metrics": obj{"get": obj{
			"operationId": "metrics",
			"summary":     "Prometheus metrics: requests, latency histograms, engine calls, node gauges.",
			"security":    []obj{{}},
			"responses": obj{"200": obj{"description": "The Prometheus text exposition format.",
				"content": obj{"text/plain": obj{"schema": obj{"type": "string"}}}}},
		}},
	}
	p["/v1/feedback"] = obj{"post": obj{
		"operationId": "feedback",
		"summary":     "Report what turned out right for answers recorded in the decision log.",
		"description": "One outcome, or a batch {\"outcomes\": [...]} recorded all or none. The latest outcome " +
			"for a question wins; earlier ones are kept.",
		"requestBody": jsonBody("FeedbackRequest"),
		"responses": keyed(bodyRead("", "Error", obj{
			"200": jsonReply("Every outcome recorded.", "FeedbackResult"),
			"404": jsonReply("No answer was recorded under the request id.", "Error"),
			"422": jsonReply("Not valid: loc names the field (outcome, question, request_id, outcomes.N.field).", "ValidationError"),
			"503": jsonReply("The decision log is off or failed.", "Error"),
		})),
	}}
	p["/v1/calibration"] = obj{"get": obj{
		"operationId": "calibration",
		"summary":     "How calibrated recorded answers were, measured on their outcomes, with a suggested gate and min_label_mass.",
		"parameters": []obj{
			windowParam,
			{"name": "target_error", "in": "query", "schema": obj{"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}, "description": "The share of wrong decisions above the gate to stay under; default the configuration's (0.02)."},
			{"name": "max_in_scope_loss", "in": "query", "schema": obj{"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}, "description": "The share of in-scope answers (outcome one of the options, not none) a suggested min_label_mass may abstain on; default 0.05."},
		},
		"responses": logReport("The report, per model, kind and option bucket.", "CalibrationReport", "A query parameter is not valid."),
	}}
	p["/v1/shadow"] = obj{"get": obj{
		"operationId": "shadow",
		"summary":     "How a shadow rollout's candidate compares with the served model, per question signature, with a recommendation and its evidence.",
		"description": "Pairs every answer a candidate gave to a shadowed request (shadow in the configuration) with the served " +
			"answer: agreement of the top answer, mean absolute change of the probabilities, confidence shift and, where outcomes " +
			"were reported, accuracy, ECE and log-loss of each side. See docs/shadow.md.",
		"parameters": []obj{windowParam},
		"responses":  logReport("The report, per served model, candidate and question signature.", "ShadowReport", "A query parameter is not valid."),
	}}
	p["/v1/usage"] = obj{"get": obj{
		"operationId": "usage",
		"summary":     "Spend, decisions and tokens from the decision log, by key, model and day.",
		"description": "Sums the answers recorded in [since, until): what they cost (what keys' budgets count), those " +
			"whose node has no price, the questions answered and the tokens. Keys are named by their names, never the keys. " +
			"See docs/http-api.md#budgets.",
		"parameters": []obj{
			{"name": "since", "in": "query", "schema": obj{"type": "string"}, "description": "The window's start: an RFC 3339 time such as 2026-12-01T00:00:00Z or a UTC date such as 2026-12-01; default 30 days before until."},
			{"name": "until", "in": "query", "schema": obj{"type": "string"}, "description": "The window's end (exclusive), as since; default now."},
			{"name": "group_by", "in": "query", "schema": obj{"type": "string"}, "description": "A comma-separated list of key, model and day (UTC); default none: the total alone."},
		},
		"responses": logReport("The usage, per group and in total.", "UsageReport", "A query parameter is not valid, or not one of since, until and group_by: loc names it."),
	}}
	return p
}

// windowParam is the window query parameter of the reports.
var windowParam = obj{"name": "window", "in": "query", "schema": obj{"type": "string"}, "description": "How far back: a duration such as 24h, or days such as 7d; default 7d."}

// logReport is the replies of a report read from the decision log: ok
// with schema, invalid for a query parameter it cannot read.
func logReport(ok, schema, invalid string) obj {
	return keyed(obj{
		"200": jsonReply(ok, schema),
		"422": jsonReply(invalid, "ValidationError"),
		"503": jsonReply("The decision log is off or failed.", "Error"),
	})
}

// keyed adds to a route's replies, in Jev's envelope, those of the key
// check (401, 403) and, where the route says nothing more of it, the
// rate limit's (429).
func keyed(replies obj) obj {
	replies["401"] = jsonReply("A key is configured and the caller's is missing or wrong.", "Error")
	replies["403"] = jsonReply("The caller's key does not hold the scope the route needs; the message names it (type permission_error).", "Error")
	if replies["429"] == nil {
		replies["429"] = jsonReply("The caller's key is over its rate.", "Error")
	}
	return replies
}

// jevKeyed is keyed for the routes hosted Jev answers: as it does, a
// request without a key is a 403 "Must supply an API key!", a wrong key a
// 401.
func jevKeyed(replies obj) obj {
	replies = keyed(replies)
	replies["401"] = jsonReply("A key is configured and the caller's is wrong.", "Error")
	replies["403"] = jsonReply("A key is configured and the caller sent none (type authentication_error, \"Must supply an API key!\", as hosted Jev answers it); or the caller's key does not hold the scope the route needs, the message naming it (type permission_error).", "Error")
	return replies
}

// bodyRead adds to a route's replies those of a body refused before it
// is read: too slow (408), too large (413), in an encoding the server does
// not read (415). They are in schema's envelope, each description ending
// in note.
func bodyRead(note, schema string, replies obj) obj {
	replies["408"] = jsonReply("The body did not arrive within the server's read timeout"+note+".", schema)
	replies["413"] = jsonReply("The body is over the server's limit"+note+".", schema)
	replies["415"] = jsonReply("A Content-Encoding other than gzip"+note+".", schema)
	return replies
}

// jsonBody is a required request body of schema.
func jsonBody(schema string) obj {
	return obj{"required": true, "content": obj{"application/json": obj{"schema": ref(schema)}}}
}

// withHeaders adds response headers to a reply.
func withHeaders(reply, headers obj) obj {
	reply["headers"] = headers
	return reply
}

func jsonReply(desc, schema string) obj {
	return obj{"description": desc, "content": obj{"application/json": obj{"schema": ref(schema)}}}
}

// ref refers to a component schema.
func ref(name string) *jsonschema.Schema {
	return &jsonschema.Schema{Ref: "#/components/schemas/" + name}
}

func schemas() map[string]*jsonschema.Schema {
	all := map[string]*jsonschema.Schema{
		"SystemOneRequest":       systemOneRequest(),
		"SystemOneResponse":      systemOneResponse(),
		"DecisionsRequest":       decisionsRequest(),
		"DecisionsResponse":      decisionsResponse(),
		"OpenAIError":            openAIError(),
		"ModelList":              infer[modelList](),
		"Model":                  infer[model](),
		"DecideRequest":          gateway.WithoutDialect(gateway.RequestSchema()),
		"DecideResponse":         gateway.WithoutDialect(gateway.ResponseSchema()),
		"DecideBatchRequest":     gateway.WithoutDialect(gateway.BatchRequestSchema()),
		"DecideBatchResponse":    gateway.WithoutDialect(gateway.BatchResponseSchema()),
		"Health":                 health(),
		"Live":                   live(),
		"Readiness":              readiness(),
		"Error":                  errorSchema(),
		"ValidationError":        validationError(),
		"FeedbackRequest":        feedbackRequest(),
		"FeedbackResult":         infer[outcomes.FeedbackResult](),
		"CalibrationReport":      infer[outcomes.CalibrationReport](),
		"ShadowReport":           infer[outcomes.ShadowReport](),
		"UsageReport":            infer[outcomes.UsageReport](),
		"SystemOneBatchRequest":  systemOneBatchRequest(),
		"SystemOneBatchResponse": systemOneBatchResponse(),
	}
	for _, s := range all {
		openObjects(s)
	}
	return all
}

func infer[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("web: inferring the schema of %v: %v", reflect.TypeFor[T](), err)) // our own types: a bug
	}
	return s
}

// modelList is GET /v1/models's body.
type modelList struct {
	Models []struct {
		Name         string                `json:"name" jsonschema:"The model id to send as model."`
		Description  string                `json:"description" jsonschema:"The nodes that serve it, and what it is an alias of."`
		ReleaseDate  string                `json:"release_date" jsonschema:"YYYY-MM-DD: the day this server first listed it."`
		Capabilities decision.Capabilities `json:"capabilities" jsonschema:"What it can be asked on POST /v1/systemone."`
	} `json:"models" jsonschema:"Jev's shape, sorted by name."`
	Object string  `json:"object" jsonschema:"list"`
	Data   []model `json:"data" jsonschema:"OpenAI's shape, sorted by id."`
}

// model is one model in OpenAI's shape: an entry of the list's data, and
// GET /v1/models/{id}.
type model struct {
	ID           string                `json:"id"`
	Object       string                `json:"object" jsonschema:"model"`
	Created      int64                 `json:"created" jsonschema:"When this server first listed it, in Unix seconds."`
	OwnedBy      string                `json:"owned_by"`
	Capabilities decision.Capabilities `json:"capabilities" jsonschema:"What it can be asked on POST /v1/decisions."`
}

// GateHeaders are the request headers of both answering wires, which the
// document lists as their parameters. The HTTP face defines them
// (httpapi's DebiasHeader, PriorHeader, MinLabelMassHeader and
// NoneOptionHeader); a test there holds the two lists together.
var GateHeaders = []string{"X-System1-Debias", "X-System1-Prior", "X-System1-Min-Label-Mass", "X-System1-None-Option"}

func gateHeaders() []obj {
	desc := []string{
		"Ask each choice in several orders of its options and average (permute), or not (off); absent is the configured one.",
		"Divide a label prior out of the readings: off, batch or content_free; absent is the configured one.",
		"Refuse each question whose engine put less than this on the options' labels at all (no option seemed to fit), where the engine can tell.",
		"true adds the option \"" + decision.NoneOption + "\" after each choice question's options: a question where it wins is refused, any other answered over the caller's options, renormalised.",
	}
	schema := []obj{
		{"type": "string", "enum": []string{decision.DebiasPermute, decision.DebiasOff}},
		{"type": "string", "enum": []string{decision.PriorOff, decision.PriorBatch, decision.PriorContentFree}},
		{"type": "number", "minimum": 0, "maximum": 1},
		{"type": "string", "enum": []string{"true", "false"}},
	}
	out := make([]obj, len(GateHeaders))
	for i, name := range GateHeaders {
		out[i] = obj{"name": name, "in": "header", "required": false, "description": desc[i], "schema": schema[i]}
	}
	return out
}

// coverageParam documents X-System1-Coverage, the request header of the
// System One routes that asks for prediction sets (httpapi's
// CoverageHeader, which a test there holds to the document), within the
// coverages the fits build sets at.
func coverageParam() obj {
	return obj{"name": "X-System1-Coverage", "in": "header", "required": false,
		"description": fmt.Sprintf("Asks for each question's prediction set at this coverage, %v to %v: X-System1-Sets and X-System1-Set-Coverage in the reply. Another value, or the header twice, is a 422 naming it.",
			calibration.MinCoverage, calibration.MaxCoverage),
		"schema": obj{"type": "number", "minimum": calibration.MinCoverage, "maximum": calibration.MaxCoverage}}
}

func health() *jsonschema.Schema {
	node := infer[fleet.State]()
	node.Description = "One node's state: cooling down (healthy false) until cool_until, for cool_reason; whether it holds its constraint."
	states := make([]any, len(fleet.ConstraintStates))
	for i, st := range fleet.ConstraintStates {
		states[i] = st
	}
	node.Properties["constraint"].Properties["state"].Enum = states
	return &jsonschema.Schema{
		Type:     "object",
		Required: []string{"status"},
		Properties: map[string]*jsonschema.Schema{
			"status":        {Type: "string", Enum: []any{"ok"}, Description: "ok while the process serves."},
			"nodes_status":  {Type: "string", Enum: []any{fleet.FleetOK, fleet.FleetDegraded, fleet.FleetDown}, Description: "The nodes' states in one word: ok (every node healthy), degraded (some cool down, the others serve) or down (none healthy, or none configured). With nodes only."},
			"version":       {Type: "string"},
			"auth":          {Type: "boolean", Description: "Whether the /v1 routes need a key."},
			"nodes":         {Type: "array", Items: node},
			"paused":        {Type: "boolean", Description: "Whether decide is paused (system1 toggle off): it abstains without asking a model. Only with POST /v1/decide served."},
			"pause_problem": text("Set when the pause state file is unreadable, which fails closed (paused): what is wrong and how to repair it."),
		},
	}
}

// live is GET /livez's body.
func live() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Required: []string{"status"}, Properties: map[string]*jsonschema.Schema{
		"status": {Type: "string", Enum: []any{"ok"}},
	}}
}

// readiness is GET /readyz's body (httpapi.Readiness, which this package
// cannot import: TestOpenAPIMatchesServer holds the two together).
func readiness() *jsonschema.Schema {
	check := &jsonschema.Schema{Type: "object", Required: []string{"check"}, Properties: map[string]*jsonschema.Schema{
		"check":  {Type: "string", Enum: []any{"decision_log", "nodes", "draining"}, Description: "decision_log: the configured decision log is not open; nodes: a configured model has no node that answered a health probe yet; draining: shutting down."},
		"detail": text("What is missing, naming models and nodes; with auth on, only to a caller with a key."),
	}}
	return &jsonschema.Schema{Type: "object", Required: []string{"status"}, Properties: map[string]*jsonschema.Schema{
		"status":    {Type: "string", Enum: []any{"ready", "not_ready", "draining"}, Description: "ready (200); not_ready or draining (503)."},
		"not_ready": {Type: "array", Items: check, Description: "The conditions not met; none when ready."},
	}}
}

func text(desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: desc}
}

func unitNumber() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "number", Minimum: new(0.0), Maximum: new(1.0)}
}

// constant is the schema of the one value v.
func constant(v string) *jsonschema.Schema { return &jsonschema.Schema{Const: new(any(v))} }

// allRequired is an object schema of props, every one required.
func allRequired(props map[string]*jsonschema.Schema) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Required: slices.Sorted(maps.Keys(props)), Properties: props}
}

// anyJSON is any JSON value of the listed types.
func anyJSON(desc string, types ...string) *jsonschema.Schema {
	return &jsonschema.Schema{Types: types, Description: desc}
}

// openObjects says that an object schema naming no members allows any
// (additionalProperties true), in s and every schema inside it. JSON
// Schema allows them without it, but openapi-typescript reads an object
// schema without it as an object with no members at all, and the
// README's "state": {"ticket": ...} would not compile.
func openObjects(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if (s.Type == "object" || slices.Contains(s.Types, "object")) && s.Properties == nil && s.AdditionalProperties == nil && s.PatternProperties == nil {
		s.AdditionalProperties = &jsonschema.Schema{}
	}
	for _, p := range s.Properties {
		openObjects(p)
	}
	for _, list := range [][]*jsonschema.Schema{s.OneOf, s.AnyOf, s.AllOf, s.PrefixItems} {
		for _, sub := range list {
			openObjects(sub)
		}
	}
	openObjects(s.AdditionalProperties)
	openObjects(s.Items)
}

// entry is a criterion's meaning: any JSON the model is shown.
func entry() *jsonschema.Schema {
	return anyJSON(fmt.Sprintf("What the option means, shown to the model; its name and this together at most %s as JSON.",
		kib(decision.DefaultLimits().MaxOptionBytes)), "string", "object", "array", "null")
}

// kib writes a byte size the way the limits are documented: 4 KiB.
func kib(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d bytes", n)
}

// systemOneRequest is POST /v1/systemone's body. Its limits are the
// domain's defaults (decision.DefaultLimits, gateway.MaxOptions); a server
// may change the question count (max_questions) and a node lower the
// option cap (max_options).
func systemOneRequest() *jsonschema.Schema {
	lim := decision.DefaultLimits()
	instr := anyJSON(fmt.Sprintf("What to decide, shown to the model; at most %s as JSON.", kib(lim.MaxInstructionBytes)), "string", "object", "array", "null")
	question := func(k, desc string, criteria *jsonschema.Schema, required ...string) *jsonschema.Schema {
		return &jsonschema.Schema{Type: "object", Description: desc, Required: append([]string{"type"}, required...),
			Properties: map[string]*jsonschema.Schema{"type": constant(k), "instructions": instr, "criteria": criteria}}
	}
	choice := question("choice", fmt.Sprintf("One of the criteria's keys, %d to %d of them (as a node's max_options allows), in the order the model sees them.",
		lim.MinChoiceOptions, gateway.MaxOptions),
		&jsonschema.Schema{Type: "object", MinProperties: new(lim.MinChoiceOptions), MaxProperties: new(gateway.MaxOptions), AdditionalProperties: entry()}, "criteria")
	noul := question("noul", "P(true).", &jsonschema.Schema{Types: []string{"object", "null"},
		Properties: map[string]*jsonschema.Schema{"true": entry(), "false": entry()}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}})
	score := question("score", fmt.Sprintf("The expected level of an ordered rubric, lowest first, %d to %d levels.", lim.MinScoreLevels, lim.MaxScoreLevels),
		&jsonschema.Schema{Type: "array", MinItems: new(lim.MinScoreLevels), MaxItems: new(lim.MaxScoreLevels), Items: entry()}, "criteria")
	return &jsonschema.Schema{
		Type:     "object",
		Required: []string{"model", "state", "questions"},
		Properties: map[string]*jsonschema.Schema{
			"model": text("A model id from GET /v1/models, or a configured alias."),
			"state": anyJSON(fmt.Sprintf("What the questions are about: text or JSON, at most %s as JSON.", kib(lim.MaxStateBytes)), "string", "object", "array"),
			"questions": {Type: "object", MinProperties: new(1), MaxProperties: new(lim.MaxQuestions),
				Description:          fmt.Sprintf("Questions by the caller's ids, answered in this order; at most %d unless the server's max_questions says otherwise.", lim.MaxQuestions),
				AdditionalProperties: &jsonschema.Schema{OneOf: []*jsonschema.Schema{choice, noul, score}}},
		},
	}
}

func systemOneResponse() *jsonschema.Schema {
	probs := &jsonschema.Schema{Type: "object", AdditionalProperties: unitNumber(), Description: "Per option (per level for a score), in order, summing to 1."}
	answer := func(k string, props map[string]*jsonschema.Schema) *jsonschema.Schema {
		props["type"] = constant(k)
		return allRequired(props)
	}
	return &jsonschema.Schema{
		Type:     "object",
		Required: []string{"model", "answers", "usage", "latency_ms"},
		Properties: map[string]*jsonschema.Schema{
			"model": text("The model the engine reported."),
			"answers": {Type: "object", Description: "One answer per question, by its id, in question order.",
				AdditionalProperties: &jsonschema.Schema{OneOf: []*jsonschema.Schema{
					answer("choice", map[string]*jsonschema.Schema{"choice": text("The most probable key."), "confidence": unitNumber(), "probabilities": probs}),
					answer("noul", map[string]*jsonschema.Schema{"noul": unitNumber()}),
					answer("score", map[string]*jsonschema.Schema{"score": {Type: "number", Minimum: new(0.0)}, "confidence": unitNumber(),
						"legend": {Type: "object", Description: "Each level's criterion, as sent, by its level."}, "probabilities": probs}),
				}}},
			"usage": {Type: "object", Required: []string{"input_tokens", "output_tokens"}, Properties: map[string]*jsonschema.Schema{
				"input_tokens":  {Type: "integer", Minimum: new(0.0)},
				"output_tokens": {Type: "integer", Minimum: new(0.0)},
				"estimated":     {Type: "boolean", Description: "Present (true) when an engine reported no counts."},
			}},
			"latency_ms": {Type: "integer", Minimum: new(0.0)},
		},
	}
}

// decisionsRequest is POST /v1/decisions's body. Its caps are the wire's
// (decisionsapi) and the domain's; a server may lower the question count
// (max_questions) and a node the choices (max_options).
func decisionsRequest() *jsonschema.Schema {
	lim := decisionsapi.Limits(decision.DefaultLimits())
	lim.MaxChoiceOptions = decisionsapi.MaxChoices
	closed := &jsonschema.Schema{Not: &jsonschema.Schema{}}
	part := &jsonschema.Schema{Type: "object", Required: []string{"type"}, Description: "input_text {text}, input_json {data} or input_image (refused: code unsupported_input).",
		Properties: map[string]*jsonschema.Schema{"type": {Type: "string"}}, AdditionalProperties: &jsonschema.Schema{}}
	instr := &jsonschema.Schema{Description: fmt.Sprintf("What to decide: text, or parts (input_text, input_json); at most %s as JSON. Missing or null is none.", kib(lim.MaxInstructionBytes)),
		AnyOf: []*jsonschema.Schema{{Type: "string"}, {Type: "array", Items: part}, {Type: "null"}}}
	name := &jsonschema.Schema{Types: []string{"string", "null"}, Description: "Unique; answered as sent, or null when left out."}
	question := func(k, desc string, extra map[string]*jsonschema.Schema, required ...string) *jsonschema.Schema {
		props := map[string]*jsonschema.Schema{"type": constant(k), "name": name, "instructions": instr}
		maps.Copy(props, extra)
		return &jsonschema.Schema{Type: "object", Description: desc, Required: append([]string{"type"}, required...), Properties: props, AdditionalProperties: closed}
	}
	described := func(key string, value *jsonschema.Schema) *jsonschema.Schema {
		return &jsonschema.Schema{Type: "object", Required: []string{key}, AdditionalProperties: closed,
			Properties: map[string]*jsonschema.Schema{key: value, "description": {Type: "string"}}}
	}
	predicate := question("predicate", "P(true).", nil)
	choice := question("choice", fmt.Sprintf("One of the values, %d to %d of them (as a node's max_options allows), unique by type and value.", lim.MinChoiceOptions, lim.MaxChoiceOptions),
		map[string]*jsonschema.Schema{"choices": {Type: "array", MinItems: new(lim.MinChoiceOptions), MaxItems: new(lim.MaxChoiceOptions),
			Items: described("value", &jsonschema.Schema{Types: []string{"string", "boolean"}, Description: "Given back typed: true and \"true\" are two choices."})}}, "choices")
	score := question("score", fmt.Sprintf("The expected level of an ordered rubric, lowest first, %d to %d levels.", lim.MinScoreLevels, lim.MaxScoreLevels),
		map[string]*jsonschema.Schema{"levels": {Type: "array", MinItems: new(lim.MinScoreLevels), MaxItems: new(lim.MaxScoreLevels), Items: described("label", &jsonschema.Schema{Type: "string"})}}, "levels")
	return &jsonschema.Schema{
		Type:                 "object",
		Required:             []string{"model", "input", "questions"},
		AdditionalProperties: closed,
		Description:          "Any other top-level field is a 400 naming it.",
		Properties: map[string]*jsonschema.Schema{
			"model": text("A model id from GET /v1/models, or a configured alias."),
			"input": {Description: fmt.Sprintf("What the questions are about: a string, or items (messages of text and JSON parts, tool calls and their outputs), read into the state; at most %s. An image anywhere is a 400 (unsupported_input).", kib(lim.MaxStateBytes)),
				AnyOf: []*jsonschema.Schema{{Type: "string"}, {Type: "array", Items: &jsonschema.Schema{Type: "object", AdditionalProperties: &jsonschema.Schema{}}}}},
			"questions": {Type: "array", MinItems: new(1), MaxItems: new(lim.MaxQuestions),
				Description: fmt.Sprintf("Answered in this order; at most %d, or the server's max_questions where lower.", lim.MaxQuestions),
				Items:       &jsonschema.Schema{OneOf: []*jsonschema.Schema{predicate, choice, score}}},
			"prompt_cache_key":     {Types: []string{"string", "null"}, Description: "Accepted and ignored."},
			"prompt_cache_options": {Types: []string{"object", "null"}, Description: "Accepted and ignored.", AdditionalProperties: &jsonschema.Schema{}},
			"safety_identifier":    {Types: []string{"string", "null"}, MaxLength: new(decisionsapi.MaxSafetyIdentifier), Description: "Accepted and ignored."},
		},
	}
}

// decisionsResponse is POST /v1/decisions's 200.
func decisionsResponse() *jsonschema.Schema {
	name := &jsonschema.Schema{Types: []string{"string", "null"}, Description: "The question's name, null when unnamed."}
	answer := func(k string, props map[string]*jsonschema.Schema) *jsonschema.Schema {
		props["type"], props["name"] = constant(k), name
		return allRequired(props)
	}
	counter := &jsonschema.Schema{Type: "integer", Minimum: new(0.0)}
	return &jsonschema.Schema{
		Type:     "object",
		Required: []string{"model", "answers", "usage"},
		Properties: map[string]*jsonschema.Schema{
			"model": text("The model the engine reported."),
			"answers": {Type: "array", Description: "One answer per question, in question order.", Items: &jsonschema.Schema{OneOf: []*jsonschema.Schema{
				answer("predicate", map[string]*jsonschema.Schema{"probability": unitNumber()}),
				answer("choice", map[string]*jsonschema.Schema{"choice": {Types: []string{"string", "boolean"}, Description: "The most probable value, typed as asked."},
					"confidence": unitNumber(), "probabilities": {Type: "array", Description: "Every value, in request order, summing to 1.",
						Items: allRequired(map[string]*jsonschema.Schema{"value": {Types: []string{"string", "boolean"}}, "probability": unitNumber()})}}),
				answer("score", map[string]*jsonschema.Schema{"score": {Type: "number", Minimum: new(0.0)}, "confidence": unitNumber(),
					"probabilities": {Type: "array", Description: "Every level, lowest first, summing to 1.",
						Items: allRequired(map[string]*jsonschema.Schema{"value": {Type: "integer", Minimum: new(0.0)}, "label": {Type: "string"}, "probability": unitNumber()})}}),
				answer("refusal", map[string]*jsonschema.Schema{}),
			}}},
			"usage": allRequired(map[string]*jsonschema.Schema{
				"input_tokens":          counter,
				"input_tokens_details":  allRequired(map[string]*jsonschema.Schema{"cached_tokens": counter, "cache_write_tokens": counter}),
				"output_tokens":         counter,
				"output_tokens_details": allRequired(map[string]*jsonschema.Schema{"reasoning_tokens": counter}),
				"total_tokens":          counter,
			}),
		},
	}
}

// systemOneBatchRequest is POST /v1/systemone/batch's body: a
// /v1/systemone body with states in place of its state.
func systemOneBatchRequest() *jsonschema.Schema {
	s := systemOneRequest()
	st := s.Properties["state"]
	delete(s.Properties, "state")
	st.Description = "One state: " + st.Description
	s.Properties["states"] = &jsonschema.Schema{Type: "array", Items: st, MinItems: new(1), MaxItems: new(systemone.MaxBatchStates),
		Description: fmt.Sprintf("What the questions are about, 1 to %d states, each asked the questions.", systemone.MaxBatchStates)}
	s.Required = []string{"model", "states", "questions"}
	return s
}

// systemOneBatchResponse is POST /v1/systemone/batch's reply.
func systemOneBatchResponse() *jsonschema.Schema {
	failed := &jsonschema.Schema{Type: "object", Required: []string{"status", "error"},
		Description: "A state not answered: the error body its own POST /v1/systemone would have got, with that status.",
		Properties: map[string]*jsonschema.Schema{
			"status": {Type: "integer", Minimum: new(400.0), Maximum: new(599.0)},
			"error":  errorSchema().Properties["error"],
			"detail": anyJSON("As in that error body: an object, or a 422's list of problems.", "object", "array"),
		}}
	usage := systemOneResponse().Properties["usage"]
	usage.Description = "The answered states' usage, summed."
	return &jsonschema.Schema{
		Type:     "object",
		Required: []string{"results", "request_ids", "usage"},
		Properties: map[string]*jsonschema.Schema{
			"results": {Type: "array", Description: "One per state, in the states' order.",
				Items: &jsonschema.Schema{OneOf: []*jsonschema.Schema{ref("SystemOneResponse"), failed}}},
			"request_ids": {Type: "array", Items: text("A request id, as x-typesafe-request-id gives a single request's."),
				Description: "The request id each state's answers were recorded under, aligned with results: what POST /v1/feedback names them by."},
			"usage": usage,
		},
	}
}

// openAIError is every error of POST /v1/decisions and what no route
// serves below it and /v1/models: OpenAI's envelope.
func openAIError() *jsonschema.Schema {
	nullable := func(desc string) *jsonschema.Schema {
		return &jsonschema.Schema{Types: []string{"string", "null"}, Description: desc}
	}
	return &jsonschema.Schema{
		Type:     "object",
		Required: []string{"error"},
		Properties: map[string]*jsonschema.Schema{
			"error": {Type: "object", Required: []string{"message", "type", "param", "code"}, Properties: map[string]*jsonschema.Schema{
				"message": text("Every problem, each after the JSON path it is at."),
				"type":    text("invalid_request_error, requests (a rate limit) or server_error."),
				"param":   nullable("The JSON path of the first problem (questions[3].choices[1].value), the header, or model."),
				"code":    nullable("unsupported_input, invalid_api_key, missing_scope, model_not_found, rate_limit_exceeded, or null."),
			}},
		},
	}
}

// errorSchema is every non-422 error, in both shapes clients read.
func errorSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:     "object",
		Required: []string{"error", "detail"},
		Properties: map[string]*jsonschema.Schema{
			"error": {Type: "object", Required: []string{"message", "type"}, Properties: map[string]*jsonschema.Schema{
				"message": text(""), "type": text("authentication_error, rate_limit_error, ..."), "param": {Types: []string{"string", "null"}}}},
			"detail": {Type: "object", Required: []string{"error_type", "message"}, Properties: map[string]*jsonschema.Schema{
				"error_type": text("The same as error.type."), "message": text("The same as error.message.")}},
		},
	}
}

// validationError is a 422: pydantic's detail list beside OpenAI's error.
func validationError() *jsonschema.Schema {
	s := errorSchema()
	s.Properties["detail"] = &jsonschema.Schema{Type: "array", Items: &jsonschema.Schema{
		Type: "object", Required: []string{"loc", "msg", "type"}, Properties: map[string]*jsonschema.Schema{
			"loc":  {Type: "array", Items: &jsonschema.Schema{Types: []string{"string", "integer"}}},
			"msg":  text("The problem."),
			"type": text("The problem's kind."),
		}}}
	return s
}

// feedbackRequest is POST /v1/feedback's body: one outcome or a batch. The
// outcome is raw JSON in the Go type, so its schema is written here.
func feedbackRequest() *jsonschema.Schema {
	item := &jsonschema.Schema{
		Type:     "object",
		Required: []string{"request_id", "outcome"},
		Properties: map[string]*jsonschema.Schema{
			"request_id": text("The request_id of the answer: the decide response's, or the x-typesafe-request-id of a /v1/systemone reply."),
			"question":   text("The question's id within the request; leave out for a decide result, which has one question."),
			"outcome": {Description: "What turned out right: an option for a decide result, a criteria key for a choice, true or false for a noul, a level for a score; none for a choice none of whose options was right (unless none is one of them).",
				AnyOf: []*jsonschema.Schema{{Type: "string"}, {Type: "boolean"}, {Type: "integer"}}},
		},
	}
	return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{item, {
		Type:       "object",
		Required:   []string{"outcomes"},
		Properties: map[string]*jsonschema.Schema{"outcomes": {Type: "array", Items: item, MinItems: new(1), MaxItems: new(outcomes.MaxFeedbackOutcomes)}},
	}}}
}
