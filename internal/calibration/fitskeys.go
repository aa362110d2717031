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
	top, err := objectKeys(data, reflect.TypeFor[Fits]())
	if err != nil {
		return fmt.Errorf("fits: %w", err)
	}
	if v, ok := jsonx.Lookup(top, "fits"); ok {
		if err := eachItem(v, "fit", fitKeys); err != nil {
			return fmt.Errorf("fits: %w", err)
		}
	}
	return nil
}

func fitKeys(item json.RawMessage) error {
	ms, err := objectKeys(item, reflect.TypeFor[Fit]())
	if err != nil {
		return err
	}
	for _, m := range ms {
		var err error
		switch m.Key {
		case "holdout":
			_, err = objectKeys(m.Value, reflect.TypeFor[Score]())
		case "gate":
			_, err = objectKeys(m.Value, reflect.TypeFor[FitGate]())
		case "confidence_map":
			_, err = objectKeys(m.Value, reflect.TypeFor[ConfidenceMap]())
		case "escalations":
			if err := eachItem(m.Value, "escalation", func(e json.RawMessage) error {
				_, err := objectKeys(e, reflect.TypeFor[Escalation]())
				return err
			}); err != nil {
				return err
			}
		case "sets":
			if err := eachItem(m.Value, "set", setKeys); err != nil {
				return err
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m.Key, err)
		}
	}
	return nil
}

func setKeys(item json.RawMessage) error {
	ms, err := objectKeys(item, reflect.TypeFor[Conformal]())
	if err != nil {
		return err
	}
	if v, ok := jsonx.Lookup(ms, "holdout"); ok {
		if _, err := objectKeys(v, reflect.TypeFor[SetCoverage]()); err != nil {
			return fmt.Errorf("holdout: %w", err)
		}
	}
	if v, ok := jsonx.Lookup(ms, "calibrator"); ok {
		if _, err := objectKeys(v, reflect.TypeFor[Calibrator]()); err != nil {
			return fmt.Errorf("calibrator: %w", err)
		}
	}
	return nil
}

// eachItem checks each element of data, when it is an array, with check,
// naming what failed by what and its index.
func eachItem(data json.RawMessage, what string, check func(json.RawMessage) error) error {
	var items []json.RawMessage
	if json.Unmarshal(data, &items) != nil {
		return nil // not an array: the decoder names it
	}
	for i, item := range items {
		if err := check(item); err != nil {
			return fmt.Errorf("%s %d: %w", what, i, err)
		}
	}
	return nil
}

// objectKeys checks the keys of data, when it is an object, against t's,
// and returns its members (none when it is not an object).
func objectKeys(data json.RawMessage, t reflect.Type) ([]jsonx.Member, error) {
	ms, err := jsonx.Members(data)
	if errors.Is(err, jsonx.ErrNotObject) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ms, knownKeys(ms, t)
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
