package decision

// Kinds are the question kinds, in the order capabilities list them.
var Kinds = []Kind{Noul, Choice, Score}

// Capabilities are what a served model can be asked, so that a client can
// ask before it sends: the question types, the limits, and what system1
// does not read (images, Jev 1.14's box questions, a long context). Both
// wires' model lists and system1_capabilities advertise them, each with
// its own words for the question types; they follow from the model's
// Limits, which is their one home.
type Capabilities struct {
	QuestionTypes []string `json:"question_types" jsonschema:"The question types the model answers, in the wire's words (noul, choice and score on the System One wire and here; predicate, choice and score on OpenAI's Decisions wire)."`
	Images        bool     `json:"images" jsonschema:"Whether images are read (Jev 1.14's assets, OpenAI's input_image): never, so a request with one is refused before any engine call."`
	Box           bool     `json:"box" jsonschema:"Whether Jev 1.14's box questions are answered: never; they need images."`
	LongContext   bool     `json:"long_context" jsonschema:"Whether TypeSafe-Danger-Zone-Long-Context is honoured: no, the engine's own context applies."`
	MaxQuestions  int      `json:"max_questions" jsonschema:"The most questions one request may ask."`
	MaxChoices    int      `json:"max_choices" jsonschema:"The most options one choice may offer: the largest option cap of the nodes serving the model."`
	MaxLevels     int      `json:"max_levels" jsonschema:"The most levels one score may have."`
	MaxStateBytes int      `json:"max_state_bytes" jsonschema:"The largest state, in bytes of JSON."`
}

// KindName is a question kind in the domain's words, which are the System
// One wire's: noul, choice, score.
func KindName(k Kind) string { return string(k) }

// Capabilities are what a model under these limits can be asked, each
// question kind named by name: its word on the wire that advertises it.
func (l Limits) Capabilities(name func(Kind) string) Capabilities {
	c := Capabilities{MaxQuestions: l.MaxQuestions, MaxChoices: l.MaxChoiceOptions, MaxLevels: l.MaxScoreLevels, MaxStateBytes: l.MaxStateBytes}
	for _, k := range Kinds {
		c.QuestionTypes = append(c.QuestionTypes, name(k))
	}
	return c
}
