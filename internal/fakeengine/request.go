package fakeengine

import (
	"encoding/json"
	"strings"
)

// chatRequest is an inference request in any of the three dialects.
type chatRequest struct {
	Model              string          `json:"model"`
	Messages           []message       `json:"messages"`
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

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

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
	r.Grammar, r.CachePrompt = c.Grammar != "", c.CachePrompt
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

// The fake's chat template, ChatML as stories260K's: /apply-template
// renders with it, and a /completion prompt list is read back through it.
const (
	chatHead   = "<|im_start|>system\n"
	chatMiddle = "<|im_end|>\n<|im_start|>user\n"
	chatTail   = "<|im_end|>\n<|im_start|>assistant\n"
)

// applyTemplate answers llama.cpp's POST /apply-template: the prompt the
// chat endpoint would evaluate for the messages.
func applyTemplate(body []byte) ([]byte, bool) {
	var c chatRequest
	if json.Unmarshal(body, &c) != nil {
		return nil, false
	}
	var r Request
	c.fill(&r)
	out, _ := json.Marshal(map[string]string{"prompt": chatHead + r.System + chatMiddle + r.User + chatTail})
	return out, true
}

// completionList is llama.cpp's POST /completion with a list of prompts,
// each the chat template's rendering of a system and a user message.
type completionList struct {
	Model       string   `json:"model"`
	Prompt      []string `json:"prompt"`
	NProbs      int      `json:"n_probs"`
	Grammar     string   `json:"grammar"`
	CachePrompt bool     `json:"cache_prompt"`
	Temperature *float64 `json:"temperature"`
	NPredict    int      `json:"n_predict"`
}

// requests reads each prompt back as the chat request it renders; false
// when one is not the template's.
func (l completionList) requests(base Request) ([]Request, bool) {
	out := make([]Request, len(l.Prompt))
	for i, text := range l.Prompt {
		rest, ok := strings.CutPrefix(text, chatHead)
		rest, ok2 := strings.CutSuffix(rest, chatTail)
		system, user, ok3 := strings.Cut(rest, chatMiddle)
		if !ok || !ok2 || !ok3 {
			return nil, false
		}
		c := chatRequest{Model: l.Model, Messages: []message{{"system", system}, {"user", user}},
			Temperature: l.Temperature, Logprobs: true, TopLogprobs: l.NProbs, Grammar: l.Grammar, CachePrompt: l.CachePrompt, MaxTokens: &l.NPredict}
		out[i] = base
		out[i].Inference = true
		c.fill(&out[i])
	}
	return out, true
}
