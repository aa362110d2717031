package systemone

import (
	"reflect"
	"strings"
	"testing"

	"system1/internal/decision"
)

// Requests of one question each, for the seeds below.
const (
	deptRequest   = `{"model":"m","state":"s","questions":{"dept":{"type":"choice","criteria":{"billing":null,"technical":null,"sales":null}}}}`
	urgentRequest = `{"model":"m","state":"s","questions":{"urgent":{"type":"noul"}}}`
)

// asBeforeSeeds are replies at the edges where reading JSON in one pass
// could part from encoding/json: repeated keys, nulls, field names in
// another case, escapes, invalid UTF-8, numbers out of range, syntax
// errors anywhere. Each is accepted unless it says otherwise.
var asBeforeSeeds = []struct{ req, reply string }{
	{fuzzFallbackRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5},` +
		`"dept":{"type":"choice","choice":"billing","confidence":0.5,"probabilities":{"billing":0.6,"technical":0.3,"sales":0.1}},` +
		`"mood":{"type":"score","score":1.0,"confidence":0.5,"legend":{"0":"a","1":"b","2":"c"},"probabilities":{"0":0.1,"1":0.8,"2":0.1}}},` +
		`"usage":{"input_tokens":1,"output_tokens":1}}`},
	// Repeated keys: the last counts; objects of a map add up.
	{fuzzFallbackRequest, `{"model":"x","model":"m","answers":{"urgent":{"type":"noul","noul":0.5}},"answers":{` +
		`"dept":{"type":"choice","choice":"billing","confidence":0.5,"probabilities":{"billing":0.6,"technical":0.3},"probabilities":{"sales":0.1}},` +
		`"mood":{"type":"score","score":1.0,"confidence":0.5,"legend":{"0":"a","1":"b"},"legend":{"2":"c"},"probabilities":{"0":0.1,"1":0.8,"2":0.1}}},` +
		`"usage":{"input_tokens":1},"usage":{"output_tokens":2}}`},
	{fuzzFallbackRequest, `{"model":"m","answers":{"urgent":{"type":"bogus"},"urgent":{"type":"noul","noul":0.5},` +
		`"dept":{"type":"choice","choice":"billing","confidence":0.5,"probabilities":{"billing":0.6,"technical":0.3,"sales":0.1}},` +
		`"mood":{"type":"score","score":1.0,"confidence":0.5,"legend":{"0":"a","1":"b","2":"c"},"probabilities":{"0":0.1,"1":0.8,"2":0.1}}},` +
		`"usage":{"input_tokens":1,"output_tokens":1},"usage":null,"usage":{"output_tokens":null}}`},
	{urgentRequest, `{"model":"m","model":null,"answers":{"urgent":{"type":"noul","noul":0.5}},"usage":{}}`},   // no model
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5}},"answers":null,"usage":{}}`}, // no answers
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5},"urgent":null},"usage":{}}`},  // missing
	{urgentRequest, `{"model":"m","answers":{"x":null},"answers":null,"answers":{"urgent":{"type":"noul","noul":0.5}},"usage":{}}`},
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5}},"usage":{"input_tokens":1},"usage":null}`}, // no usage
	// Nulls: a string field keeps its value, a pointer field empties, a
	// probability is 0.
	{fuzzFallbackRequest, `{"model":"m","answers":{"urgent":{"type":"noul","type":null,"noul":0.5},` +
		`"dept":{"type":"choice","choice":"billing","confidence":0.5,"probabilities":{"billing":0.6,"technical":0.4,"sales":null}},` +
		`"mood":{"type":"score","score":1.0,"confidence":0.5,"legend":{"0":null,"1":"b","2":"c"},"probabilities":{"0":null,"1":0.9,"2":0.1}}},` +
		`"usage":{"input_tokens":null,"output_tokens":1}}`},
	{deptRequest, `{"model":"m","answers":{"dept":{"type":"choice","choice":"billing","choice":null,"confidence":0.5,"probabilities":{"billing":0.6,"technical":0.4,"sales":0}}},"usage":{}}`}, // no choice
	{deptRequest, `{"model":"m","answers":{"dept":{"type":"choice","choice":"billing","confidence":0.5,"probabilities":{"billing":1},"probabilities":null,"probabilities":{"billing":0.6,"technical":0.4,"sales":0}}},"usage":{}}`},
	{deptRequest, `{"model":"m","answers":{"dept":{"type":"choice","choice":"billing","confidence":0.5,"probabilities":{"billing":0.6,"technical":0.4,"sales":0,"legal":0}}},"usage":{}}`}, // a key too many
	{deptRequest, `{"model":"m","answers":{"dept":{"type":"choice","choice":"billing","confidence":0.5,"probabilities":{"billing":0.6,"technical":0.4,"legal":0}}},"usage":{}}`},           // sales missing
	{deptRequest, `{"model":"m","answers":{"dept":{"type":"choice","choice":"billing","confidence":0.5,"probabilities":{"sales":0,"technical":0.4,"billing":0.6,"billing":0.6}}},"usage":{}}`},
	// Field names in another case, and in escapes.
	{fuzzFallbackRequest, `{"MODEL":"m","Answers":{"urgent":{"TYPE":"noul","Noul":0.5},` +
		`"dept":{"type":"choice","choice":"billing","Confidence":0.5,"PROBABILITIES":{"billing":0.6,"technical":0.3,"sales":0.1}},` +
		"\"mood\":{\"type\":\"score\",\"\u017fcore\":1.0,\"confidence\":0.5,\"legend\":{\"0\":\"a\",\"1\":\"b\",\"2\":\"c\"},\"probabilities\":{\"0\":0.1,\"1\":0.8,\"2\":0.1}}}," +
		"\"usage\":{\"input_to\u212aens\":3,\"OUTPUT_TOKENS\":1}}"},
	{fuzzFallbackRequest, `{"mod\u0065l":"\u006d","answers":{"\u0075rgent":{"type":"n\u006ful","noul":0.5},` +
		`"dept":{"type":"choice","choice":"bill\u0069ng","confidence":0.5,"probabilities":{"b\u0069lling":0.6,"technical":0.3,"sales":0.1}},` +
		`"mood":{"type":"score","score":1.0,"confidence":0.5,"legend":{"\u0030":"a","1":"b","2":"c"},"probabilities":{"0":0.1,"1":0.8,"2":0.1}}},` +
		`"usage":{"input_tokens":1,"output_tokens":1}}`},
	{deptRequest, "{\"model\":\"m\xff\",\"answers\":{\"dept\":{\"type\":\"choice\",\"choice\":\"billing\",\"confidence\":0.5,\"probabilities\":{\"billing\":0.6,\"technical\":0.3,\"sales\":0.1}}},\"usage\":{}}"},
	{deptRequest, "{\"model\":\"m\",\"answers\":{\"dept\":{\"type\":\"choice\",\"choice\":\"bill\xffing\",\"confidence\":0.5,\"probabilities\":{\"billing\":0.6,\"technical\":0.3,\"sales\":0.1}}},\"usage\":{}}"}, // not an option
	{urgentRequest, `{"model":"\ud800","answers":{"urgent":{"type":"noul","noul":0.5}},"usage":{}}`},
	// Numbers.
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":1e400}},"usage":{}}`}, // out of range
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":-0}},"usage":{"input_tokens":-0,"output_tokens":0}}`},
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":1e-400}},"usage":{"output_tokens":1E2}}`}, // not an integer
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":5E-1}},"usage":{"input_tokens":01}}`},     // syntax
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":1.}},"usage":{}}`},                        // syntax
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":"0.5"}},"usage":{}}`},                     // a string
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":[0.5]}},"usage":{}}`},                     // an array
	// Answers to questions not asked, and the abstention marks.
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5},"bogus":null},"usage":{}}`},
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5},"bogus":{"noul":"x"}},"usage":{}}`},
	{fuzzFallbackRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5,"abstention":"abstained","abstention_threshold":0.7},` +
		`"dept":{"type":"choice","choice":"billing","confidence":0.5,"low_confidence":true,"abstention":7,"probabilities":{"billing":0.6,"technical":0.3,"sales":0.1}},` +
		`"mood":{"type":"score","score":1.0,"confidence":0.5,"abstention":"abstained","abstention_threshold":null,"legend":{"0":"a","1":"b","2":"c"},"probabilities":{"0":0.1,"1":0.8,"2":0.1}}},` +
		`"usage":{"input_tokens":1,"output_tokens":1}}`},
	// Syntax: what surrounds a value, and values nobody reads.
	{urgentRequest, " \t\r\n{\"model\" : \"m\" , \"answers\" : { \"urgent\" : { \"type\" : \"noul\" , \"noul\" : 0.5 } } , \"usage\" : { } ," +
		" \"x\" : [ 1 , -2.5e+3 , true , false , null , { \"y\" : [ ] } , \"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\" ] } \n"},
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5}},"usage":{}} x`},
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5}},"usage":{},}`},
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5}},"usage":{},"x":[1,]}`},
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5}},"usage":{},"x":"a` + "\x01" + `"}`},
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5}},"usage":{},"x":"\x"}`},
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5}},"usage":{},"x":"\u12g4"}`},
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5}},"usage":{},"x":tru}`},
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5}},"usage":{},"x":+1}`},
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5}},"usage":{},"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`},
	{urgentRequest, `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5}},"usage":{},"x":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}`},
	{urgentRequest, `{"model":"m"`},
	{urgentRequest, `[]`},
	{urgentRequest, ``},
}

// FuzzParseResponseAsBefore holds ParseResponse, which reads a reply in
// one pass, to what it did when it read the reply with encoding/json
// (parseResponseRef): the same replies accepted, read the same.
func FuzzParseResponseAsBefore(f *testing.F) {
	for _, s := range asBeforeSeeds {
		f.Add([]byte(s.req), []byte(s.reply))
	}
	f.Add([]byte(`{"model":"m","state":"s","questions":{"q":{"type":"choice","criteria":{"a":null,"b":"x"}}}}`),
		[]byte(`{"model":"m","answers":{"q":{"type":"choice","choice":"b","confidence":0.0,"probabilities":{"b":0.5,"a":0.5}}},"usage":{"input_tokens":null,"output_tokens":0}}`))
	f.Fuzz(func(t *testing.T, reqBody, body []byte) {
		p := ParseRequest(reqBody)
		if len(p.Validate(decision.DefaultLimits())) > 0 {
			p = ParseRequest([]byte(fuzzFallbackRequest))
		}
		got, err := ParseResponse(p.Request, body)
		want, wantErr := parseResponseRef(p.Request, body)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%s\nnow: %v\nbefore: %v", body, err, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s\nread now as %+v\nbefore as %+v", body, got, want)
		}
	})
}
