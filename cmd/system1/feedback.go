package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"system1/internal/decisionlog"
	"system1/internal/outcomes"
)

const feedbackUsage = `usage: system1 feedback [flags] REQUEST_ID OUTCOME
       system1 feedback [flags] --file FILE   (a /v1/feedback body; - reads stdin)

Records what turned out right for an answer in the decision log, as POST
/v1/feedback and the MCP tool system1_feedback do. OUTCOME is an option
key (yes or no, true or false for a yes/no question, a level number for a
score), or none for a choice none of whose options was right. Prints the result as JSON.

Exit status: 0 recorded; 1 the decision log is off or failed (nothing
of the batch is recorded: run it again); 2 a bad command line; 4 not
recorded: the --file body is not valid, or the outcome or question does
not fit the answer (the error's param names which); 5 no answer was
recorded under the request id.

flags:
`

// unknownRequestHint says, for a person at a terminal, why feedback found
// no answer under the id and what to do; %s is where the log is.
const unknownRequestHint = `system1 feedback: no answer is recorded under that request id in the decision log at %s.
Answers are recorded there by system1 decide, system1 serve (POST /v1/systemone and /v1/decide) and
system1 mcp, when they run with the same configuration (its decision_log) and the same --state-dir.
Check the id (system1 decide prints it as request_id; /v1/systemone replies carry it as
x-typesafe-request-id), and give feedback the --config and --state-dir of the run that answered.
`

// errNotRecorded and errUnknownRequest mark feedback refused, exits 4 and
// 5; the result has been printed.
var (
	errNotRecorded    = errors.New("not recorded")
	errUnknownRequest = errors.New("unknown request id")
)

func cmdFeedback(ctx context.Context, args []string, e env) error {
	fs := flags("feedback", e, feedbackUsage)
	cfgFlag := fs.String("config", "", "configuration file "+configDefault)
	stateDir := fs.String("state-dir", "", "folder of the decision log "+stateDirDefault)
	question := fs.String("question", "", "the question's id within the request; leave out for a decide result")
	file := fs.String("file", "", fmt.Sprintf("read a /v1/feedback body (one outcome or {\"outcomes\": [...]}, at most %d MiB) from this file; - is stdin", maxInput>>20))
	if err := parse(fs, args); err != nil {
		return err
	}
	// After "--" every word is the request id's or the outcome's, as
	// decide prints it before an id that begins with "-".
	if first := len(args) - fs.NArg(); first == 0 || args[first-1] != "--" {
		if a := flagAmong(fs, fs.Args()); a != "" {
			return e.usageError("feedback", fmt.Sprintf("%s: flags go before REQUEST_ID OUTCOME: system1 feedback [flags] REQUEST_ID OUTCOME", a))
		}
	}
	var items []outcomes.FeedbackItem
	var res *outcomes.FeedbackResult
	switch {
	case *file != "" && fs.NArg() == 0 && *question == "":
		data, err := readInput(*file, e.stdin)
		if err != nil {
			return fmt.Errorf("feedback: %w", err)
		}
		if len(data) > maxInput {
			res = &outcomes.FeedbackResult{Recorded: []outcomes.Recorded{}, Error: &outcomes.FeedbackError{Code: outcomes.FeedbackInvalid,
				Message: fmt.Sprintf("the body is over the limit of %d MiB; send the outcomes in smaller batches", maxInput>>20), Type: "value_error"}}
			break
		}
		items, res = outcomes.ParseFeedback(data)
	case *file == "" && fs.NArg() == 2:
		outcome, _ := json.Marshal(fs.Arg(1)) // a Go string always marshals
		items = []outcomes.FeedbackItem{{RequestID: fs.Arg(0), Question: *question, Outcome: outcome}}
	default:
		fs.Usage()
		return errUsage
	}
	log := logger(e)
	where := "" // the decision log asked, for an unknown request id's hint
	if res == nil {
		cfg, err := loadConfig(ctx, *cfgFlag, e.getenv, checkLog)
		if err != nil {
			return err
		}
		dlog := openDecisionLog(ctx, cfg.DecisionLog, *stateDir, e, log, nil)
		if dlog == nil && ctx.Err() != nil {
			return context.Cause(ctx) // a signal while the log opened: nothing recorded
		}
		res = outcomes.NewFeedback(dlog).Record(ctx, items)
		closeDecisionLog(dlog, log)
		if res.Error != nil && res.Error.Code == outcomes.FeedbackUnknownRequest {
			if opt, err := decisionlog.OptionsFrom(cfg.DecisionLog, *stateDir, e.getenv); err == nil {
				where = logWhere(cfg.DecisionLog, opt)
			}
		}
	}
	if err := printJSON(e, res); err != nil {
		return err
	}
	if res.Error == nil {
		return nil
	}
	switch res.Error.Code {
	case outcomes.FeedbackInvalid:
		return errNotRecorded
	case outcomes.FeedbackUnknownRequest:
		if where != "" {
			fmt.Fprintf(e.stderr, unknownRequestHint, where)
		}
		return errUnknownRequest
	}
	return errReported
}
