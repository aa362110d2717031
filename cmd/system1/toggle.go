package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"system1/internal/pause"
)

const toggleUsage = `usage: system1 toggle [--state-dir DIR] on|off|status

  off      pause System 1: system1_decide abstains without asking any model
  on       resume it
  status   show the state (the default)

The state file is read on every call by system1 mcp, serve and decide, so
a change takes effect at once. In Claude Code: /system1:toggle on|off|status.`

// cmdToggle pauses (off) or resumes (on) the gateway, or shows its state.
// The state file is written atomically and read by every gateway face on
// each call, so the change takes effect at once.
func cmdToggle(_ context.Context, args []string, e env) error {
	fs := flags("toggle", e, toggleUsage+"\n\nflags:\n")
	stateDir := fs.String("state-dir", "", "folder of the pause state file "+stateDirDefault)
	if err := parse(fs, args); err != nil {
		return err
	}
	path := pause.Path(*stateDir, e.getenv)
	verb := "status"
	if slices.ContainsFunc(fs.Args(), func(a string) bool { return strings.HasPrefix(a, "-") }) {
		return e.usageError("toggle", fmt.Sprintf("flags go before on, off or status: system1 toggle %s %s", strings.Join(fs.Args()[1:], " "), fs.Arg(0)))
	}
	switch fs.NArg() {
	case 0:
	case 1:
		verb = fs.Arg(0)
	default:
		return e.usageError("toggle", fmt.Sprintf("one of on, off or status, not %q\n%s", strings.Join(fs.Args(), " "), toggleUsage))
	}
	var s pause.State
	var err error
	switch verb {
	case "off", "pause":
		s, err = pause.Write(path, true, time.Now())
	case "on", "resume":
		s, err = pause.Write(path, false, time.Now())
	case "status":
		if s, err = pause.Read(path); err != nil {
			// The gateway fails closed on such a file; say so and how to
			// repair it.
			fmt.Fprintf(e.stdout, "System 1 is OFF: the state file is unreadable (%v), so system1_decide abstains as if paused. "+
				"Repair it with system1 toggle on (or off), which rewrites it.\nstate file: %s\n", err, path)
			return fmt.Errorf("pause state %s is unreadable", path)
		}
	default:
		return e.usageError("toggle", fmt.Sprintf("%q is not on, off or status\n%s", verb, toggleUsage))
	}
	if err != nil {
		return fmt.Errorf("pause state %s: %w", path, err)
	}
	since := ""
	if !s.Changed.IsZero() {
		since = " since " + s.Changed.Format(time.RFC3339)
	}
	if s.Paused {
		fmt.Fprintf(e.stdout, "System 1 is OFF (paused%s): system1_decide abstains without asking any model. Turn it back on with /system1:toggle on (system1 toggle on).\nstate file: %s\n", since, path)
	} else {
		fmt.Fprintf(e.stdout, "System 1 is ON%s: system1_decide asks the configured providers.\nstate file: %s\n", since, path)
	}
	return nil
}
