package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"system1/internal/decisionlog"
	"system1/internal/gateway"
	"system1/internal/tracing"
)

// cmdDecide asks the gateway for one decision, as system1_decide does, and
// prints the response: a summary for a person at a terminal, or with
// --json the response itself. Its exit status tells the outcomes apart
// (decideExits): a script can branch on an abstention without parsing.
func cmdDecide(ctx context.Context, args []string, e env) error {
	fs := flags("decide", e, "usage: system1 decide [flags] QUESTION [OPTION OPTION...]\n\nWithout options the question is answered yes or no.\n\n"+decideExits+"\nflags:\n")
	cfgFlag := fs.String("config", "", "configuration file "+configDefault)
	stateDir := fs.String("state-dir", "", "folder of the pause state file and the decision log "+stateDirDefault)
	asJSON := fs.Bool("json", false, "print the response as JSON, exactly as system1_decide returns it")
	ctxFlag := fs.String("context", "", "context object, as JSON")
	minConf := fs.Float64("min-confidence", 0, "abstain under this probability (default: the configured threshold)") // applied only when given
	reqID := fs.String("request-id", "", "request id to echo (default: generated)")
	request := fs.String("request", "", `read the whole request as JSON from this file ("-" for stdin) instead of the arguments`)
	if err := parse(fs, args); err != nil {
		return err
	}
	given := map[string]bool{} // the flags on the command line
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var raw []byte
	if *request != "" {
		if fs.NArg() > 0 {
			return e.usageError("decide", "--request takes the whole request; give no question or options with it")
		}
		var parts []string // of the request, which it would leave unread
		for _, name := range []string{"context", "min-confidence", "request-id"} {
			if given[name] {
				parts = append(parts, "--"+name)
			}
		}
		if len(parts) > 0 {
			return e.usageError("decide", "--request takes the whole request; give "+strings.Join(parts, ", ")+" in it instead")
		}
		var err error
		if raw, err = readInput(*request, e.stdin); err != nil {
			return err
		}
		if len(raw) > maxInput {
			return e.usageError("decide", fmt.Sprintf("--request %s: over the %d MiB a request may take", *request, maxInput>>20))
		}
	} else {
		if fs.NArg() == 0 {
			fs.Usage()
			return errUsage
		}
		// After "--" every word is the question's or an option.
		if first := len(args) - fs.NArg(); first == 0 || args[first-1] != "--" {
			if a := flagAmong(fs, fs.Args()[1:]); a != "" {
				return e.usageError("decide", fmt.Sprintf("%s: flags go before the question: system1 decide [flags] QUESTION [OPTION OPTION...] (a -- before the question makes every word after it an option)", a))
			}
		}
		req := gateway.Request{Question: fs.Arg(0), Options: fs.Args()[1:]} // none: a yes or no, options omitted
		if *ctxFlag != "" {
			req.Context = json.RawMessage(*ctxFlag)
			if !json.Valid(req.Context) {
				return errors.New("--context is not valid JSON")
			}
		}
		// Any value given is the request's, for the gateway to check as
		// it checks system1_decide's: -1, the default, is none.
		if given["min-confidence"] {
			if math.IsNaN(*minConf) || math.IsInf(*minConf, 0) {
				return e.usageError("decide", fmt.Sprintf("--min-confidence %v is not a number in [0, 1]", *minConf))
			}
			req.MinConfidence = minConf
		}
		// Without HTML escaping, which json.Marshal applies inside the
		// context too: the model reads it as given.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		// A --request-id given is the request's even when empty, for the
		// gateway to refuse as it refuses system1_decide's: the struct's
		// omitempty would drop it for a generated id.
		body := struct {
			gateway.Request
			RequestID *string `json:"request_id,omitempty"`
		}{Request: req}
		if given["request-id"] {
			body.RequestID = reqID
		}
		if err := enc.Encode(body); err != nil {
			return err
		}
		raw = buf.Bytes()
	}
	cfg := configPath(*cfgFlag, e.getenv)
	log := logger(e)
	// The answer is recorded in the configuration's decision log, as
	// POST /v1/decide records it, so that system1 feedback finds its id.
	g, dlog, tr := newGatewayLogged(ctx, cfg, *stateDir, e, log, cliWording, decisionlog.FaceDecide)
	tctx, span := tr.StartCall(ctx, "decide")
	res := g.Decide(tctx, raw, "")
	var failed error
	if res.Status == gateway.Failed && res.Error != nil {
		failed = errors.New(res.Error.Code + ": " + res.Error.Message)
	}
	tracing.EndCall(span, failed)
	closeLogAndTracer(dlog, tr, log)
	if *asJSON {
		if err := printJSON(e, res); err != nil {
			return err
		}
	} else if res.Status == gateway.Failed && ctx.Err() != nil {
		// Ctrl-C: the providers did not fail, nor did any deadline pass.
		fmt.Fprintf(e.stderr, "system1 decide: interrupted (%v): nothing was decided\n", context.Cause(ctx))
	} else if res.Status == gateway.Failed {
		fmt.Fprintln(e.stderr, failure(res, cfg))
	} else {
		fmt.Fprintln(e.stdout, summary(res))
		if dlog != nil && res.Provider != nil {
			// A model answered, and the log recorded it under this id:
			// the command names the log decide used, so it runs as copied.
			cmd := "system1 feedback --config " + shellQuote(cfg)
			if *stateDir != "" {
				cmd += " --state-dir " + shellQuote(*stateDir)
			}
			if strings.HasPrefix(res.RequestID, "-") {
				cmd += " --" // the id is no flag
			}
			fmt.Fprintf(e.stdout, "request_id %s: `%s %s OPTION` records the option that turned out right.\n", res.RequestID, cmd, shellQuote(res.RequestID))
		}
	}
	switch res.Status {
	case gateway.Failed:
		return errReported
	case gateway.Abstained:
		return errAbstained
	}
	return nil
}

// cliWording names the command line's own commands in the gateway's texts.
var cliWording = gateway.Wording{Decide: "system1 decide", Off: "system1 toggle off", On: "system1 toggle on"}

// decideExits documents decide's exit statuses, in its help and the README.
const decideExits = `exit status: 0 decided, 1 error (nothing decided: the configuration, the
request or every provider failed), 2 usage, 3 abstained (System 1 was
unsure, declined, or is paused: decide yourself).
`

// errAbstained is decide's outcome when the gateway abstained: nothing to
// print beyond what decide printed, and its own exit status.
var errAbstained = errors.New("abstained")

// summary is a decision or an abstention for a person at a terminal: one
// line, then why. The gateway's rationale is written for the agent that
// called system1_decide, so the terminal gets its own words.
func summary(r *gateway.Response) string {
	var b strings.Builder
	b.WriteString(r.Status)
	if r.Decision != nil {
		fmt.Fprintf(&b, ": %s", *r.Decision)
	}
	if r.Confidence != nil {
		fmt.Fprintf(&b, " (p=%.3f", *r.Confidence)
		if r.Calibrated {
			b.WriteString(", calibrated")
		}
		b.WriteString(")")
	}
	if r.Provider != nil {
		fmt.Fprintf(&b, " via %s", *r.Provider)
	}
	fmt.Fprintf(&b, " in %d ms\n", r.LatencyMS)
	switch {
	case r.Status == gateway.Decided && r.Grade != gateway.GradeAct:
		// Graded ask or escalate: the gateway's words say the grade and
		// why, never what an act is told.
		b.WriteString(r.Rationale)
	case r.Status == gateway.Decided:
		b.WriteString("A fast intuition: check it where a mistake would be costly.")
	case r.Provider == nil && len(r.Attempts) == 0:
		b.WriteString("System 1 is paused, so no model was asked. `system1 toggle on` resumes it.")
	case r.Confidence != nil && r.Threshold != nil && *r.Confidence < *r.Threshold && !strings.HasPrefix(r.Rationale, "System 1 abstained:"):
		// Under the threshold and abstained for it alone: the gateway's
		// other refusals (the implicit none option won, too little label
		// mass, the provider declined) begin "System 1 abstained:", and a
		// lower --min-confidence would mend none of them.
		fmt.Fprintf(&b, "Not confident enough to decide: the best guess is under the threshold %v (lower it with --min-confidence).", *r.Threshold)
	default:
		// Refused for another reason (the provider declined, the model
		// ranked none of the options, too little probability on them,
		// the implicit none option won): the gateway's words, which say
		// which and what to do.
		b.WriteString(r.Rationale)
	}
	return b.String()
}

// failure says, for a person at a terminal, why nothing was decided and
// what to do about it.
func failure(r *gateway.Response, cfg string) string {
	msg := fmt.Sprintf("system1 decide: %s: %s", r.Error.Code, r.Error.Message)
	switch r.Error.Code {
	case gateway.CodeConfigError:
		return msg + "\n\n" + whereConfig(cfg)
	case gateway.CodeInvalidRequest:
		return msg + "\n\nSee system1 decide -h."
	}
	for _, a := range r.Attempts {
		msg += fmt.Sprintf("\n  %s: %s: %s", a.Provider, a.Outcome, a.Detail)
	}
	return msg + "\n\nNo provider answered: check that the engines in " + cfg + " are running (system1 serve's /health shows each node)."
}

// shellQuote is s as a POSIX shell reads it back: as it is when it holds
// only characters no shell treats specially, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// maxInput bounds what decide --request and feedback --file read, above
// the HTTP routes' default body limit: a larger input is refused, not
// read whole (/dev/zero would never end).
const maxInput = 16 << 20

// readInput reads the file at path, or stdin when path is "-": at most
// maxInput bytes and one more, so that a larger input is told apart.
func readInput(path string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	return io.ReadAll(io.LimitReader(r, maxInput+1))
}
