package main

import (
	"cmp"
	"math"
	"slices"

	"system1/internal/calibration/fitting"
	"system1/internal/cases"
)

// splitParts divides the traffic into a first part of round(share * n)
// cases and a later part of the rest. Each case gets a key from a fixed
// hash of its id and the seed, and the cases with the smallest keys go
// first, so the split depends on the ids and the seed, not on the order
// of the file. Both parts keep the cases in their order in cs.
func splitParts(cs []cases.Case, share float64, seed uint64) (first, later []cases.Case) {
	n := len(cs)
	k := min(max(int(math.Round(share*float64(n))), 0), n)
	order := keyOrder(cs, seed)
	isFirst := make([]bool, n)
	for _, i := range order[:k] {
		isFirst[i] = true
	}
	for i, c := range cs {
		if isFirst[i] {
			first = append(first, c)
		} else {
			later = append(later, c)
		}
	}
	return first, later
}

// keyOrder is the indices of cs ordered by a key from a fixed hash of
// each case's id and the seed, ties by position.
func keyOrder(cs []cases.Case, seed uint64) []int {
	order := make([]int, len(cs))
	keys := make([]uint64, len(cs))
	for i, c := range cs {
		order[i] = i
		keys[i] = fitting.Rank(seed, c.ID)
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
	return order
}

// part is one loop's traffic: the first part, whose outcomes the server
// refits on, and the later part, measured.
type part struct {
	First, Later []cases.Case
}

// parts cuts the traffic for folds loops. With one fold it is one loop
// over splitParts(cs, share, seed). With k >= 2 the cases, ordered by the
// same keys, are dealt into k folds of sizes within one of each other,
// and loop f has fold f as its later part and the other folds as its
// first part: every case is measured once, held out of the loop that
// measures it. Each part keeps the cases in their order in cs.
func parts(cs []cases.Case, folds int, share float64, seed uint64) []part {
	if folds <= 1 {
		first, later := splitParts(cs, share, seed)
		return []part{{First: first, Later: later}}
	}
	order := keyOrder(cs, seed)
	fold := make([]int, len(cs))
	for rank, i := range order {
		fold[i] = rank * folds / len(cs)
	}
	out := make([]part, folds)
	for i, c := range cs {
		for f := range out {
			if fold[i] == f {
				out[f].Later = append(out[f].Later, c)
			} else {
				out[f].First = append(out[f].First, c)
			}
		}
	}
	return out
}
