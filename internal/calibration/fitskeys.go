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
	if err := typedKeys(data, reflect.TypeFor[Fits]()); err != nil {
		return fmt.Errorf("fits: %w", err)
	}
	return nil
}

// typedKeys checks the keys of data, when it is an object, against those
// of t, a struct: every key is exactly one of t's JSON names. Then it
// checks each member whose field is a struct (or a pointer to one) the
// same way, naming it by its key ("holdout: "), and each item of a member
// whose field is a list of structs, naming it by the key's singular and
// its index ("set 2: "). What is not of t's shape is left for the decoder
// to name.
func typedKeys(data json.RawMessage, t reflect.Type) error {
	ms, err := jsonx.Members(data)
	if errors.Is(err, jsonx.ErrNotObject) {
		return nil
	}
	if err != nil {
		return err
	}
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		fields[name] = t.Field(i).Type
	}
	for _, m := range ms {
		if _, ok := fields[m.Key]; !ok {
			return fmt.Errorf("unknown field %q", m.Key)
		}
	}
	for _, m := range ms {
		ft := fields[m.Key]
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			if err := typedKeys(m.Value, ft); err != nil {
				return fmt.Errorf("%s: %w", m.Key, err)
			}
		}
		var items []json.RawMessage
		if ft.Kind() != reflect.Slice || ft.Elem().Kind() != reflect.Struct || json.Unmarshal(m.Value, &items) != nil {
			continue // not a list of objects: the decoder names what is wrong
		}
		for i, item := range items {
			if err := typedKeys(item, ft.Elem()); err != nil {
				return fmt.Errorf("%s %d: %w", strings.TrimSuffix(m.Key, "s"), i, err)
			}
		}
	}
	return nil
}
