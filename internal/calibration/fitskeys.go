package calibration

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"system1/internal/jsonx"
)

// exactKeys refuses what encoding/json lets through silently in a fits
// file: invalid UTF-8 (turned into U+FFFD, so a provider name would never
// match), a key twice (the last wins) and a key in another case than the
// format's ("Temperature" fills temperature). What is not valid JSON, or
// not of the Fits shape, is left for the decoder to name.
func exactKeys(data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("fits: the file is not valid UTF-8")
	}
	if !json.Valid(data) {
		return nil
	}
	top, err := jsonx.Members(data)
	if errors.Is(err, jsonx.ErrNotObject) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fits: %w", err)
	}
	if err := knownKeys(top, reflect.TypeFor[Fits]()); err != nil {
		return fmt.Errorf("fits: %w", err)
	}
	for _, m := range top {
		if m.Key != "fits" {
			continue
		}
		var items []json.RawMessage
		if json.Unmarshal(m.Value, &items) != nil {
			return nil
		}
		for i, item := range items {
			if err := fitKeys(item); err != nil {
				return fmt.Errorf("fits: fit %d: %w", i, err)
			}
		}
	}
	return nil
}

func fitKeys(item json.RawMessage) error {
	ms, err := jsonx.Members(item)
	if errors.Is(err, jsonx.ErrNotObject) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := knownKeys(ms, reflect.TypeFor[Fit]()); err != nil {
		return err
	}
	for _, m := range ms {
		var t reflect.Type
		switch m.Key {
		case "holdout":
			t = reflect.TypeFor[Score]()
		case "gate":
			t = reflect.TypeFor[FitGate]()
		case "confidence_map":
			t = reflect.TypeFor[ConfidenceMap]()
		case "escalations":
			var items []json.RawMessage
			if json.Unmarshal(m.Value, &items) != nil {
				continue
			}
			for i, item := range items {
				if err := objectKeys(item, reflect.TypeFor[Escalation]()); err != nil {
					return fmt.Errorf("escalation %d: %w", i, err)
				}
			}
			continue
		case "sets":
			var items []json.RawMessage
			if json.Unmarshal(m.Value, &items) != nil {
				continue
			}
			for i, item := range items {
				if err := objectKeys(item, reflect.TypeFor[Conformal]()); err != nil {
					return fmt.Errorf("set %d: %w", i, err)
				}
				if err := nestedKeys(item, "holdout", reflect.TypeFor[SetCoverage]()); err != nil {
					return fmt.Errorf("set %d: %w", i, err)
				}
				if err := nestedKeys(item, "calibrator", reflect.TypeFor[Calibrator]()); err != nil {
					return fmt.Errorf("set %d: calibrator: %w", i, err)
				}
			}
			continue
		default:
			continue
		}
		if err := objectKeys(m.Value, t); err != nil {
			return fmt.Errorf("%s: %w", m.Key, err)
		}
	}
	return nil
}

// nestedKeys checks the keys of data's member key, when data is an
// object that has it, against t's.
func nestedKeys(data json.RawMessage, key string, t reflect.Type) error {
	ms, err := jsonx.Members(data)
	if err != nil {
		return nil // not an object: the decoder names it
	}
	if v, ok := jsonx.Lookup(ms, key); ok {
		if err := objectKeys(v, t); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

// objectKeys checks the keys of data, when it is an object, against t's.
func objectKeys(data json.RawMessage, t reflect.Type) error {
	ms, err := jsonx.Members(data)
	if errors.Is(err, jsonx.ErrNotObject) {
		return nil
	}
	if err != nil {
		return err
	}
	return knownKeys(ms, t)
}

// knownKeys checks every key is exactly one of t's JSON names.
func knownKeys(ms []jsonx.Member, t reflect.Type) error {
	names := map[string]bool{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names[name] = true
	}
	for _, m := range ms {
		if !names[m.Key] {
			return fmt.Errorf("unknown field %q", m.Key)
		}
	}
	return nil
}
