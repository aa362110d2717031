package main

import (
	"cmp"
	"math"
	"slices"

	"system1/internal/calibration/fitting"
	"system1/internal/cases"
)

// part is one loop's traffic: the first part, whose outcomes the server
// refits on, and the later part, measured.
type part struct {
	First, Later []cases.Case
}

// parts cuts the traffic for folds loops. Each case gets a key from a
// fixed hash of its id and the seed, and the cases are ranked by it, ties
// by position, so the cut depends on the ids and the seed, not on the
// order of the file. With one fold it is one loop whose first part is the
// round(share * n) cases ranked first and whose later part is the rest.
// With k >= 2 the cases are dealt by rank into k folds of sizes within
// one of each other, and loop f has fold f as its later part and the
// other folds as its first part: every case is measured once, held out of
// the loop that measures it. Each part keeps the cases in their order in
// cs.
func parts(cs []cases.Case, folds int, share float64, seed uint64) []part {
	n := len(cs)
	order := make([]int, n)
	keys := make([]uint64, n)
	for i, c := range cs {
		order[i] = i
		keys[i] = fitting.Rank(seed, c.ID)
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
	// fold is the loop whose later part each case is in; with one fold,
	// -1 for the cases of the first part.
	fold := make([]int, n)
	first := min(max(int(math.Round(share*float64(n))), 0), n)
	for rank, i := range order {
		if folds > 1 {
			fold[i] = rank * folds / n
		} else if rank < first {
			fold[i] = -1
		}
	}
	out := make([]part, max(folds, 1))
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
