package fakeengine

import (
	"regexp"
	"strings"
)

// chatRequest is an inference request in any of the three dialects.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	MaxTokens          *int            `json:"max_tokens"`
	Temperature        *float64        `json:"temperature"`
	Logprobs           bool            `json:"logprobs"`
	TopLogprobs        int             `json:"top_logprobs"`
	Stream             bool            `json:"stream"`
	Grammar            string          `json:"grammar"`
	CachePrompt        bool            `json:"cache_prompt"`
	ChatTemplateKwargs map[string]bool `json:"chat_template_kwargs"`
	Think              *bool           `json:"think"`
	Options            *struct {
		Temperature *float64 `json:"temperature"`
		NumPredict  *int     `json:"num_predict"`
	} `json:"options"`
	StructuredOutputs *struct {
		Choice []string `json:"choice"`
	} `json:"structured_outputs"`
	GuidedChoice []string `json:"guided_choice"`
}

var (
	grammarLabel = regexp.MustCompile(`"([^"]*)"`)
	optionLine   = regexp.MustCompile(`(?m)^([A-Za-z0-9]{1,2})\. `)
)

func (c *chatRequest) fill(r *Request) {
	r.Model = c.Model
	for _, m := range c.Messages {
		switch m.Role {
		case "system":
			r.System = m.Content
		case "user":
			r.User = m.Content
		}
	}
	r.Temperature, r.Logprobs, r.TopLogprobs, r.Stream = c.Temperature, c.Logprobs, c.TopLogprobs, c.Stream
	r.Grammar, r.CachePrompt = c.Grammar, c.CachePrompt
	if c.MaxTokens != nil {
		r.MaxTokens = *c.MaxTokens
	}
	if v, ok := c.ChatTemplateKwargs["enable_thinking"]; ok {
		r.Thinking = &v
	}
	if c.Think != nil {
		r.Thinking = c.Think
	}
	if o := c.Options; o != nil {
		if o.Temperature != nil {
			r.Temperature = o.Temperature
		}
		if o.NumPredict != nil {
			r.MaxTokens = *o.NumPredict
		}
	}
	switch {
	case strings.HasPrefix(c.Grammar, "root ::= "):
		for _, m := range grammarLabel.FindAllStringSubmatch(c.Grammar, -1) {
			r.Labels = append(r.Labels, m[1])
		}
	case c.StructuredOutputs != nil:
		r.Labels, r.Constrained = c.StructuredOutputs.Choice, true
	case c.GuidedChoice != nil:
		r.Labels, r.Constrained = c.GuidedChoice, true
	default: // the labelled option lines after the question
		i := strings.LastIndex(r.User, "Question: ")
		if i < 0 {
			break
		}
		for _, m := range optionLine.FindAllStringSubmatch(r.User[i:], -1) {
			r.Labels = append(r.Labels, m[1])
		}
	}
	r.InputTokens = len(strings.Fields(r.System)) + len(strings.Fields(r.User))
}
