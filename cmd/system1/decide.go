package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"system1/internal/gateway"
)

func init() { commands["decide"] = cmdDecide }

// cmdDecide asks the gateway for one decision, as system1_decide does, and
// prints the response: a summary line, or with --json the response
// itself. It exits 0 when the gateway decided or abstained, 1 on an error
// status.
func cmdDecide(ctx context.Context, args []string, e env) error {
	fs := flags("decide", e)
	cfgFlag := fs.String("config", "", "configuration file (default $SYSTEM1_CONFIG, else ~/.config/system1/config.yaml)")
	stateDir := fs.String("state-dir", "", "folder of the pause state file (default $CLAUDE_PLUGIN_DATA, else $XDG_STATE_HOME/system1, else ~/.local/state/system1)")
	asJSON := fs.Bool("json", false, "print the response as JSON, exactly as system1_decide returns it")
	ctxFlag := fs.String("context", "", "context object, as JSON")
	minConf := fs.Float64("min-confidence", -1, "abstain under this probability (default: the configured threshold)")
	reqID := fs.String("request-id", "", "request id to echo (default: generated)")
	request := fs.String("request", "", `read the whole request as JSON from this file ("-" for stdin) instead of the arguments`)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: system1 decide [flags] QUESTION [OPTION OPTION...]\n\nWithout options the question is answered yes or no.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	var raw []byte
	if *request != "" {
		if fs.NArg() > 0 {
			fmt.Fprintln(e.stderr, "system1 decide: --request takes the whole request; give no question or options with it")
			return errUsage
		}
		var err error
		if *request == "-" {
			raw, err = io.ReadAll(e.stdin)
		} else {
			raw, err = os.ReadFile(*request)
		}
		if err != nil {
			return err
		}
	} else {
		if fs.NArg() == 0 {
			fs.Usage()
			return errUsage
		}
		req := gateway.Request{Question: fs.Arg(0), RequestID: *reqID}
		if fs.NArg() > 1 {
			req.Options = fs.Args()[1:]
		}
		if *ctxFlag != "" {
			req.Context = json.RawMessage(*ctxFlag)
			if !json.Valid(req.Context) {
				return errors.New("--context is not valid JSON")
			}
		}
		if *minConf >= 0 {
			req.MinConfidence = minConf
		}
		var err error
		if raw, err = json.Marshal(req); err != nil {
			return err
		}
	}
	g := newGateway(configPath(*cfgFlag, e.getenv), *stateDir, e, logger(e), nil)
	res := g.Decide(ctx, raw, "")
	if *asJSON {
		out, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, string(out))
	} else {
		fmt.Fprintln(e.stdout, summary(res))
	}
	if res.Status == gateway.Failed {
		return fmt.Errorf("%s: %s", res.Error.Code, res.Error.Message)
	}
	return nil
}

// summary is the response in one line, then the rationale.
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
	fmt.Fprintf(&b, " in %d ms\n%s", r.LatencyMS, r.Rationale)
	return b.String()
}
