package systemone

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// appendFloat writes a probability the way Jev prints it: shortest
// decimal form, with ".0" on whole numbers (1.0, 0.0), never NaN or Inf.
func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0 // the domain never hands these out; belt and braces for the wire
	}
	start := len(b)
	b = strconv.AppendFloat(b, v, 'f', -1, 64)
	if !bytes.ContainsAny(b[start:], ".e") {
		b = append(b, '.', '0')
	}
	return b
}

// appendString writes s as a JSON string: as is when it is plain
// printable ASCII, the common case, else escaped by encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			q, _ := json.Marshal(s) // a Go string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// comma separates element i of a list or object from the one before it.
func comma(b []byte, i int) []byte {
	if i > 0 {
		return append(b, ',')
	}
	return b
}
