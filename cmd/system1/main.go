// Command system1 is a fast decision service: given a state and typed
// questions it returns calibrated probabilities from a language model
// served by an engine such as llama.cpp, Ollama or vLLM. It serves the
// System One HTTP API, an MCP server for agents, and a command line for
// deciding, benchmarking and calibrating.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"system1/internal/config"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	stopOn := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) { // under nohup it stays ignored
		// A closed terminal stops a face as Ctrl-C does, draining, where
		// it would die with what its decision log had queued.
		stopOn = append(stopOn, syscall.SIGHUP)
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopOn...)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		os.Exit(2)
	case errors.Is(err, errAbstained), errors.Is(err, errRowsFailed):
		os.Exit(3)
	case errors.Is(err, errNotRecorded):
		os.Exit(4)
	case errors.Is(err, errUnknownRequest):
		os.Exit(5)
	case errors.Is(err, errReported):
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "system1:", err)
		os.Exit(1)
	}
}

// errUsage marks a command line that could not be understood; its details
// have already been printed.
var errUsage = errors.New("usage")

// errReported marks a failure whose explanation has already been printed.
var errReported = errors.New("failed")

// env is what a command may touch of the outside world.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// quiet is set for the commands a person runs at a terminal: their
	// log says only what is wrong (warnings and errors) unless -v is
	// given. serve and mcp, whose log is their record, say more.
	quiet bool
	// verbose is every command's -v, registered by flags.
	verbose *bool
}

const usage = `usage: system1 <command> [flags]

commands:
  serve      serve the System One HTTP API (POST /v1/systemone, /v1/decide, /v1/models)
  mcp        serve the System 1 gateway as an MCP server over stdio
  decide     ask one decision from the command line
  run        ask the same questions about every row of a file, resumably
  bench      measure accuracy, calibration and latency on labelled case files
  calibrate  fit calibration temperatures from case files or a bench report
  check      hold a locked case set's answers against a baseline: a drift gate for CI
  toggle     pause or resume the gateway: toggle on|off|status
  feedback   record what turned out right for an answer, in the decision log
  shadow     report how a shadow rollout's candidate compares: shadow --report
  replay     ask the logged questions of a candidate and report: replay --from-log --candidate MODEL
  version    print the version

Run "system1 <command> -h" for a command's flags.
`

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	e := env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr, verbose: new(bool)}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	cmd, rest := args[0], args[1:]
	if c, ok := commands[cmd]; ok {
		e.quiet = cmd != "serve" && cmd != "mcp"
		return c(ctx, rest, e)
	}
	fmt.Fprintf(stderr, "system1: unknown command %q\n\n%s", cmd, usage)
	return errUsage
}

// commands are every subcommand, each but the last two in its own file.
var commands = map[string]func(context.Context, []string, env) error{
	"serve":     cmdServe,
	"mcp":       cmdMCP,
	"decide":    cmdDecide,
	"run":       cmdRun,
	"bench":     cmdBench,
	"calibrate": cmdCalibrate,
	"check":     cmdCheck,
	"toggle":    cmdToggle,
	"feedback":  cmdFeedback,
	"shadow":    cmdShadow,
	"replay":    cmdReplay,
	"version":   cmdVersion,
	"--version": cmdVersion,
	"help":      cmdHelp,
	"-h":        cmdHelp,
	"--help":    cmdHelp,
}

func cmdVersion(_ context.Context, _ []string, e env) error {
	fmt.Fprintln(e.stdout, "system1", version)
	return nil
}

func cmdHelp(_ context.Context, _ []string, e env) error {
	fmt.Fprint(e.stdout, usage)
	return nil
}

// printJSON prints v on stdout as indented JSON.
func printJSON(e env, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, string(data))
	return nil
}

// The defaults of --config and --state-dir, as every command's help says
// them (configPath, pause.Dir).
const (
	configDefault   = "(default $SYSTEM1_CONFIG, else ~/.config/system1/config.yaml)"
	stateDirDefault = "(default $CLAUDE_PLUGIN_DATA, else $XDG_STATE_HOME/system1, else ~/.local/state/system1)"
)

// flags makes a command's flag set, printing errors and help to stderr:
// usage, then the flags.
func flags(name string, e env, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet("system1 "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, usage); fs.PrintDefaults() }
	if e.verbose != nil {
		fs.BoolVar(e.verbose, "v", false, "verbose: log what the command does to stderr (info lines; debug for serve and mcp); $SYSTEM1_LOG_LEVEL overrides")
	}
	return fs
}

// usageError says on stderr what is wrong with a command line, as
// "system1 CMD: MSG", and returns errUsage.
func (e env) usageError(cmd string, msg any) error {
	fmt.Fprintf(e.stderr, "system1 %s: %v\n", cmd, msg)
	return errUsage
}

// checkBaseURL says what is wrong with the base URL of an endpoint given
// by flag (run --url, bench and calibrate --endpoint, shadow --url).
func checkBaseURL(flag, raw string) error {
	if problem := config.BaseURLProblem(raw); problem != "" {
		return fmt.Errorf("%s %q %s, such as http://127.0.0.1:3000", flag, raw, problem)
	}
	return nil
}

// bearerKey reads the key an endpoint is asked with from the variable
// --key-env names (none named, no key). An unset or empty variable is an
// error unless the key is optional (the default variable of shadow
// --url); a key a header cannot carry (a line ending kept from a key
// file) is refused at once, where every call would fail as a connection.
func bearerKey(e env, variable string, optional bool) (string, error) {
	key := ""
	if variable != "" {
		key = e.getenv(variable)
	}
	switch {
	case key == "" && (optional || variable == ""):
		return "", nil
	case key == "":
		return "", fmt.Errorf("--key-env %s: the variable is empty or unset", variable)
	}
	if err := config.CheckKey(key); err != nil {
		return "", fmt.Errorf("--key-env %s: %w", variable, err)
	}
	return key, nil
}

// parse parses a command line, mapping a bad one to errUsage.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}

// noArguments refuses a command line that holds a word after its flags,
// with the command's usage, for the commands that take none.
func noArguments(fs *flag.FlagSet, e env) error {
	if fs.NArg() == 0 {
		return nil
	}
	fmt.Fprintf(e.stderr, "%s: unexpected argument %q\n\n", fs.Name(), fs.Arg(0))
	fs.Usage()
	return errUsage
}

// flagAmong is the first of args that names one of fs's flags ("-json",
// "--model=m"), or "": the flag set stops at its first argument, so a
// flag after it would be read as one more argument and left unset.
func flagAmong(fs *flag.FlagSet, args []string) string {
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && fs.Lookup(name) != nil {
			return a
		}
	}
	return ""
}

// configPath picks the configuration file: the flag, else $SYSTEM1_CONFIG,
// else system1/config.yaml under the user's configuration folder, else,
// when that is missing, the file scripts/run.sh wrote for the engine it
// started (runConfigPath) where there is one: a newcomer's plugin and
// command line then work beside run.sh with nothing else set up.
func configPath(flagValue string, getenv func(string) string) string {
	if p := cmp.Or(flagValue, getenv("SYSTEM1_CONFIG")); p != "" {
		return p
	}
	p := "system1.yaml"
	if dir := getenv("XDG_CONFIG_HOME"); dir != "" {
		p = filepath.Join(dir, "system1", "config.yaml")
	} else if home := getenv("HOME"); home != "" {
		p = filepath.Join(home, ".config", "system1", "config.yaml")
	}
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		if r := runConfigPath(getenv); r != "" {
			if _, err := os.Stat(r); err == nil {
				return r
			}
		}
	}
	return p
}

// runConfigPath is where scripts/run.sh writes its configuration, read
// as run.sh reads its environment: config-$SYSTEM1_PORT.yaml (3000 by
// default) under run/ in $SYSTEM1_CACHE (~/.cache/system1); "" without a
// home.
func runConfigPath(getenv func(string) string) string {
	cache := getenv("SYSTEM1_CACHE")
	if cache == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		cache = filepath.Join(home, ".cache", "system1")
	}
	return filepath.Join(cache, "run", "config-"+cmp.Or(getenv("SYSTEM1_PORT"), "3000")+".yaml")
}

// logger writes text logs to stderr; stdout may carry a protocol. The
// level comes from $SYSTEM1_LOG_LEVEL (debug, info, warn, error); else a
// command run at a terminal logs warnings and errors only, serve and mcp
// info lines too, and -v lowers either by one level.
func logger(e env) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(e.getenv("SYSTEM1_LOG_LEVEL")))); err != nil {
		level = slog.LevelInfo
		if e.quiet {
			level = slog.LevelWarn
		}
		if e.verbose != nil && *e.verbose {
			level -= 4 // one level: warn to info, info to debug
		}
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
}
