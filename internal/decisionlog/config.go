package decisionlog

import (
	"time"

	"system1/internal/config"
)

// OptionsFrom turns the configuration's decision_log section into
// Options: PostgreSQL when url is set, else the SQLite file in the state
// directory (config.DecisionLog.File, with stateDir and getenv as
// pause.Dir takes them).
func OptionsFrom(c config.DecisionLog, stateDir string, getenv func(string) string) Options {
	opt := Options{
		KeepStates: c.KeepStates,
		Retention:  time.Duration(c.Retention),
		Queue:      c.Queue,
		MaxRows:    c.MaxRows,
	}
	if c.URL != "" {
		opt.URL = c.URL
	} else {
		opt.Path = c.File(stateDir, getenv)
	}
	return opt
}
