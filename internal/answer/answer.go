package answer

import (
	"cmp"
	"context"
	"time"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/fleet"
	"system1/internal/tracing"
)

// Options configure a Service.
type Options struct {
	// Router is the fleet that answers; required.
	Router *fleet.Router
	// Fits returns the calibration fits to apply, read once per request;
	// nil, or a nil result, applies none.
	Fits func() *calibration.Fits
	// Recorder takes the record of every answered question (a
	// *decisionlog.Log); nil records nothing.
	Recorder Recorder
	// Local is set for a face whose caller runs system1 itself (the MCP
	// server over stdio, the command line): failures keep the nodes'
	// addresses. Otherwise they are taken out, as every caller over the
	// network must get them.
	Local bool
	// Cache, when not nil, answers exact repeats of a request from
	// memory (see Cache); nil asks the fleet every time.
	Cache *Cache
	// Shadow, when set, draws answered requests to ask a candidate
	// model too, off the request path (see Shadow).
	Shadow *Shadow
	// Meter, when set, is told what each answered question cost and
	// which were refused (see Meter).
	Meter Meter
	// Cascades are models made of others (see Cascade), answered to by
	// their names.
	Cascades []Cascade
}

// Service answers requests across the fleet: the one sequence every face
// calls. It is safe for concurrent use.
type Service struct {
	opt Options
	// fleet is the whole fleet, which a shadow's candidate is asked on
	// even from a service held to some nodes (Only).
	fleet *fleet.Router
}

// New returns the answer path over o.Router.
func New(o Options) *Service { return &Service{opt: o, fleet: o.Router} }

// Fits are the fits the service applies now; nil when none are loaded.
func (s *Service) Fits() *calibration.Fits {
	if s.opt.Fits == nil {
		return nil
	}
	return s.opt.Fits()
}

// Only is the service over the named nodes alone (fleet.Router.Only),
// with the same fits, recorder and redaction: a link of the decide chain
// held to some nodes.
func (s *Service) Only(nodes []string) *Service {
	o := s.opt
	o.Router = s.opt.Router.Only(nodes)
	return &Service{opt: o, fleet: s.fleet}
}

// WithCache is the service answering repeats from c (none when nil),
// with the same router, fits, recorder and redaction.
func (s *Service) WithCache(c *Cache) *Service {
	o := s.opt
	o.Cache = c
	return &Service{opt: o, fleet: s.fleet}
}

// Request is a request to answer, and who asks it, for its records.
type Request struct {
	decision.Request
	// Face names the face in the records: decisionlog.FaceSystemOne,
	// FaceDecisions, FaceDecide or FaceMCP.
	Face string
	// RequestID is the id the caller can report outcomes under.
	RequestID string
	// Start is when the face received the request; zero records no
	// latency.
	Start time.Time
	// Provider is the link of the decide chain asking, whose fits apply
	// before the model's; empty for none.
	Provider string
	// Gate is what an answer must clear not to be refused.
	Gate Gate
	// Coverage, when not 0, asks for every question's prediction set at
	// that coverage, in [calibration.MinCoverage, MaxCoverage]
	// (Question.Set).
	Coverage float64
	// Cascade, set by a cascade asking one of its stages, names the
	// cascade, and Stage the stage's index in it, for the records.
	Cascade string
	Stage   int
	// Key is the name of the key that asked, for the records (a key's
	// spend is counted from them); "" takes the one WithKey put in the
	// context, if any.
	Key string
}

type keyCtx struct{}

// WithKey is ctx carrying the name of the key a request came with, for
// the records of every answer asked under it: a face that authenticates
// says it once, whatever route answers.
func WithKey(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, keyCtx{}, name)
}

// keyOf is the key name WithKey put in ctx, "" for none.
func keyOf(ctx context.Context) string {
	name, _ := ctx.Value(keyCtx{}).(string)
	return name
}

// Answer is a request answered: every question, calibrated, with the
// steps that made each distribution, the usage summed and the warnings a
// caller should see. It is made once, here, so that the faces agree.
type Answer struct {
	// Model is the model id the engines report.
	Model string
	// Questions are aligned with the request's questions.
	Questions []Question
	Usage     Usage
	// Cost is what answering cost, in US dollars: the sum of the
	// questions' Cost, 0 for a cache hit, which asked nothing; nil when
	// some node that answered has no price, so the cost is not known.
	Cost *decision.USD
	// Warnings are in question order.
	Warnings []Warning
	// Calibrated is set when every distribution was tempered by a fit,
	// and there was one: with every question declined, none was.
	Calibrated bool
	// FitVersion is the Revision of the fits that tempered at least one
	// distribution, "" when none did.
	FitVersion string
	// Fits are the fits the answer was calibrated with, nil when none
	// are loaded: one snapshot, so that whatever grades the answer later
	// reads the same revision that tempered it.
	Fits *calibration.Fits
	// Cache is what the cache made of the request: CacheHit, CacheMiss
	// or CacheBypass; "" when there is no cache.
	Cache string
	// Stages are the stages a cascade asked, in order; nil for a model
	// that is not a cascade.
	Stages []string
	// Took is how long a batch's state took from when it was asked
	// (AnswerBatch): its own latency, as a single request's face times
	// its own; 0 outside a batch.
	Took time.Duration
}

// Question is one question's answer.
type Question struct {
	// Dist is the distribution answered: the engine's after every step.
	Dist decision.Distribution
	// Engine is the distribution as the engine read it, in the caller's
	// option order.
	Engine decision.Distribution
	// Steps are the steps applied to Engine, in order, each with the
	// distribution it left; the last one's is Dist. A step is applied
	// only by being listed here, so every face can name what it reports.
	Steps []decision.Step
	// LabelMass is the probability the engine put on the option labels
	// at all (the mean over the orders asked); NaN where the engine
	// cannot know (after its constraint, or a System One upstream) or the
	// options went in rounds over separate prompts.
	LabelMass float64
	// Model is the model that answered, as the node reports it, and Node
	// the node; Attempts are every try of the question, in order.
	Model, Node string
	// Fingerprint is the build of Model that Node served it from, and
	// Since when Node has served that build (docs/fingerprints.md); ""
	// and zero where it is not known (fingerprints off, or the model not
	// probed on the node yet).
	Fingerprint string
	Since       time.Time
	Attempts    []fleet.Attempt
	// Cost is what Node charged for this answer (questionCost): on a
	// hosted endpoint the forwarded request's price and usage sit on the
	// request's first question, as its usage does; nil when Node has no
	// price.
	Cost *decision.USD
	// InputTokens and OutputTokens are what Node reported the question
	// used; 0 on a cache hit.
	InputTokens, OutputTokens int
	// Set is the prediction set at the request's Coverage; nil when
	// none was asked for.
	Set *Set
	// Refusal, when not nil, says why the service will not stand behind
	// the answer (see Gate and refuse). Dist is still the reading where
	// there is one; a node that refused outright (a Decisions endpoint's
	// refusal) gave none, and then Dist is nil. The Decisions wire answers
	// it with a refusal, the System One wire, which has no word for it,
	// with an error naming the question, decide with an abstention.
	Refusal *Refusal
	// Stage is the stage of a cascade that answered, and Stages every
	// stage asked the question, in order (Stage last); "" and nil for a
	// model that is not a cascade.
	Stage  string
	Stages []string
}

// Uncalibrated is q's distribution before its calibrator
// (decision.Uncalibrated), the one its decision log record gives a refit
// (decisionlog.Entry.Uncalibrated): the engine's after debias and prior.
func (q Question) Uncalibrated() decision.Distribution {
	return decision.Uncalibrated(q.Engine, q.Steps)
}

// Served is what served q, in the words every face uses (decide's
// served, /v1/systemone's X-System1-Served): "node=N model=M
// fingerprint=F", each name written through name (the face's escaping),
// the fingerprint "unknown" where it is not known.
func (q Question) Served(name func(string) string) string {
	fp := "unknown"
	if q.Fingerprint != "" {
		fp = name(q.Fingerprint)
	}
	return "node=" + name(q.Node) + " model=" + name(q.Model) + " fingerprint=" + fp
}

// hit answers req from the cache, recorded and offered to the shadow as
// any answer, when an answer is stored under k.
func (s *Service) hit(req Request, k key, fits *calibration.Fits) (*Answer, bool) {
	a, ok := s.opt.Cache.get(k, fits)
	if !ok {
		return nil, false
	}
	s.opt.Cache.hits.Add(1)
	s.record(req, a)
	s.opt.Shadow.offer(s, req, a)
	return a, true
}

// Answer asks the fleet every question of req and, when every one was
// answered, reports and records the answer; otherwise it returns a
// *Failure and records nothing.
//
// With a cache, an exact repeat of an earlier request is answered from
// it, and recorded like any answer: under its own request id, so that
// feedback on it works, with the stored answer's node, model and steps;
// one that arrives while the same request is being asked waits for it.
//
// A cascade's name is answered stage by stage (see Cascade), each stage
// through Answer.
func (s *Service) Answer(ctx context.Context, req Request) (a *Answer, err error) {
	req.Key = cmp.Or(req.Key, keyOf(ctx))
	if c, ok := s.cascade(req.Model); ok {
		return s.answerCascade(ctx, req, c)
	}
	tracing.SetState(ctx, req.State)
	ctx, qs := tracing.StartQuestions(ctx, req.Questions)
	defer func() { endQuestions(qs, req.Request, a, err) }()
	fits := s.Fits()
	c := s.cacheKey(req, fits)
	if c.ok && !c.bypass {
		if a, ok := s.hit(req, c.key, fits); ok {
			return a, nil
		}
		// A miss asks the fleet once however many identical requests
		// arrive while it runs: they wait and are answered from the
		// cache after it. One whose wait ends without an answer stored
		// (the first failed: failures are not kept) asks for itself.
		if done, wait := s.opt.Cache.ask(c.key); done != nil {
			defer done()
			// The one asking before may have stored its answer and
			// finished between the miss above and this registration.
			if a, ok := s.hit(req, c.key, fits); ok {
				return a, nil
			}
		} else {
			s.opt.Cache.coalesced.Add(1)
			select {
			case <-wait:
				c = s.rekey(req, c) // under the build that served the one waited for
				if a, ok := s.hit(req, c.key, fits); ok {
					return a, nil
				}
			case <-ctx.Done():
			}
		}
	}
	if a, err = s.ask(ctx, s.opt.Router, req, fits); err != nil {
		return nil, err
	}
	switch {
	case c.bypass:
		a.Cache = CacheBypass
		s.opt.Cache.bypassed.Add(1)
	case c.ok:
		a.Cache = CacheMiss
		s.opt.Cache.misses.Add(1)
		s.opt.Cache.put(s.rekey(req, c).key, a)
	}
	s.record(req, a)
	s.opt.Shadow.offer(s, req, a)
	return a, nil
}

// ask is the answer path's own steps between the cache and the record:
// router asks the fleet, and what comes back is held to every question
// answered and every distribution one over its options, reported with
// the steps under fits, and given its refusals. A shadow's candidate is
// asked by them too.
func (s *Service) ask(ctx context.Context, router *fleet.Router, req Request, fits *calibration.Fits) (*Answer, error) {
	res, err := router.Decide(ctx, req.Request)
	model := router.Resolve(req.Model) // as the fleet's metrics name it
	s.spend(model, res)                // what the nodes billed, answered in the end or not
	if err != nil {
		return nil, s.refused(req.Model, err)
	}
	declined := s.declined(ctx, res, model)
	if f := s.unanswered(req.Request, res); f != nil {
		return nil, f
	}
	a := report(req, res, fits)
	if f := s.check(req.Request, declined, a); f != nil {
		return nil, f
	}
	refuse(req, declined, a)
	s.countRefusals(model, a)
	return a, nil
}
