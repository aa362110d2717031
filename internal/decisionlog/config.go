package decisionlog

import (
	"time"

	"system1/internal/config"
)

// OptionsFrom turns the configuration's decision_log section into
// Options: PostgreSQL when url or url_env is set (getenv reads the
// variable; config.DecisionLog.PostgresURL says what is wrong with it),
// else the SQLite file in the state directory (config.DecisionLog.File,
// with stateDir and getenv as pause.Dir takes them).
func OptionsFrom(c config.DecisionLog, stateDir string, getenv func(string) string) (Options, error) {
	opt := Options{
		KeepStates: c.KeepStates,
		Retention:  time.Duration(c.Retention),
		Queue:      c.Queue,
		MaxRows:    c.MaxRows,
	}
	u, err := c.PostgresURL(getenv)
	if err != nil {
		return Options{}, err
	}
	if u != "" {
		opt.URL = u
	} else {
		opt.Path = c.File(stateDir, getenv)
	}
	return opt, nil
}
