package outcomes

import (
	"context"
	"errors"
	"time"

	"system1/internal/decisionlog"
)

// UsageReport is GET /v1/usage's answer: the decision log's records of
// [since, until) summed by the groups asked, and in total.
type UsageReport struct {
	Since   time.Time    `json:"since" jsonschema:"The start of the window (inclusive)."`
	Until   time.Time    `json:"until" jsonschema:"The end of the window (exclusive)."`
	GroupBy []string     `json:"group_by" jsonschema:"What the groups are by: of key, model and day, in the order asked."`
	Groups  []UsageGroup `json:"groups" jsonschema:"One entry a group that answered in the window, ordered by its names."`
	Total   UsageGroup   `json:"total" jsonschema:"The whole window's."`
}

// UsageGroup is one group's use: its names (only those grouped by),
// what its answers cost, the answers whose node had no price, the
// questions answered and the tokens.
type UsageGroup struct {
	Key          *string `json:"key,omitempty" jsonschema:"The key's name (keys[].name, never the key); empty for answers no key asked (auth off, MCP, the CLI, shadow rollouts). Only when grouped by key."`
	Model        *string `json:"model,omitempty" jsonschema:"The model that answered. Only when grouped by model."`
	Day          *string `json:"day,omitempty" jsonschema:"The UTC day, YYYY-MM-DD. Only when grouped by day."`
	USD          string  `json:"usd" jsonschema:"What the answers cost, in US dollars, as an exact decimal string such as \"0.000123\" (as X-System1-Cost): what budgets count."`
	Unpriced     int64   `json:"unpriced" jsonschema:"Answers of nodes without a price, whose cost is not known (not in usd)."`
	Decisions    int64   `json:"decisions" jsonschema:"Questions answered."`
	InputTokens  int64   `json:"input_tokens" jsonschema:"Input tokens the nodes reported."`
	OutputTokens int64   `json:"output_tokens" jsonschema:"Output tokens the nodes reported."`
}

// ReportUsage sums log's records of [since, until) by the groups of by
// (of decisionlog.UsageGroups).
func ReportUsage(ctx context.Context, log *decisionlog.Log, since, until time.Time, by []string) (UsageReport, error) {
	rep := UsageReport{Since: since.UTC(), Until: until.UTC(), GroupBy: by, Groups: []UsageGroup{}, Total: usageGroup(decisionlog.Usage{})}
	if log == nil {
		return rep, errors.New("the decision log is off")
	}
	rows, err := log.Usage(ctx, since, until, by)
	if err != nil {
		return rep, err
	}
	var total decisionlog.Usage
	for _, u := range rows {
		g := usageGroup(u)
		for _, name := range by {
			switch name {
			case "key":
				g.Key = &u.Key
			case "model":
				g.Model = &u.Model
			case "day":
				g.Day = &u.Day
			}
		}
		rep.Groups = append(rep.Groups, g)
		total.Cost += u.Cost
		total.Unpriced += u.Unpriced
		total.Decisions += u.Decisions
		total.InputTokens += u.InputTokens
		total.OutputTokens += u.OutputTokens
	}
	rep.Total = usageGroup(total)
	return rep, nil
}

func usageGroup(u decisionlog.Usage) UsageGroup {
	return UsageGroup{USD: u.Cost.String(), Unpriced: u.Unpriced, Decisions: u.Decisions,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
}
