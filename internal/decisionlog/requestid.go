package decisionlog

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"time"
)

// MaxRequestIDChars bounds a request id, counted in characters: a
// caller's id longer than this is refused where it is given (decide's
// request_id), and feedback, which names answers by it, takes every id
// an answer was recorded under.
const MaxRequestIDChars = 128

// NewRequestID makes a request id in Jev's shape, for every face: req_
// and 32 hex digits, the first 12 the time in milliseconds and the other
// 20 random (80 bits). Ids made later sort later, so the decision log's
// index on them grows at its end instead of at random pages: a batch of
// records then writes a few pages, not one per record.
func NewRequestID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails
	return "req_" + hex.EncodeToString(b[:])
}

// requestIDTime is when NewRequestID made id; false for an id it did not
// make (a caller's own).
func requestIDTime(id string) (time.Time, bool) {
	h, ok := strings.CutPrefix(id, "req_")
	if !ok || len(h) != 32 {
		return time.Time{}, false
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(b[:8]) >> 16)), true
}
