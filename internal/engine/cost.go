package engine

// Calls is the number of engine calls Ask makes for a question of n
// options when one call reads per labels (0: any number): one when they
// fit, else a first round of per and further rounds of per-1 new options,
// each carrying the first round's anchor (see rounds). It is what Ask
// does, not an estimate; a dialect may repeat one call once more (llama.cpp
// asks again for a wider top-k when labels were missing).
func Calls(n, per int) int {
	if per <= 0 || n <= per {
		return 1
	}
	if per < 2 { // Ask refuses such a question without a call
		return 0
	}
	return 1 + (n-per+per-2)/(per-1)
}
