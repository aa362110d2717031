package openai

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzUnmarshalAsEncodingJSON holds Unmarshal to encoding/json's reading
// of any bytes as a chat reply and as a list of token entries (what a
// /completion entry holds): both accept or both refuse, and what they
// accept is the same.
func FuzzUnmarshalAsEncodingJSON(f *testing.F) {
	f.Add([]byte(`{"model":"m","choices":[{"logprobs":{"content":[{"id":1065,"token":"A","logprob":-0.5,"top_logprobs":[` +
		`{"id":1065,"token":"A","logprob":-0.5},{"id":1066,"token":"B","logprob":null}]}]}}],"usage":{"prompt_tokens":57,"completion_tokens":1}}`))
	f.Add([]byte(`{"model":"\ud800x\u00e9","choices":[{"message":{"content":"\xff"}}]}`))
	f.Add([]byte(`{"choices":[{"logprobs":{"content":[{"logprob":1e400}]}}]}`))
	f.Add([]byte(`{"model":"a","model":"b"} `))
	f.Add([]byte(`[{"id":7,"token":"A","bytes":[65],"logprob":-0.1,"top_logprobs":[{"id":7,"token":"A","logprob":-0.1}]}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		same(t, body, func() any { return new(ChatResponse) })
		same(t, body, func() any { return new([]TokenLogprob) })
	})
}

func same(t *testing.T, body []byte, fresh func() any) {
	t.Helper()
	want, got := fresh(), fresh()
	wantErr, gotErr := json.Unmarshal(body, want), Unmarshal(body, got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%q as %T: encoding/json says %v, Unmarshal %v", body, want, wantErr, gotErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q as %T: read as %+v, encoding/json reads %+v", body, want, got, want)
	}
}
