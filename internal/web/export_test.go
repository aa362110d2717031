package web

// Files lists the served assets by URL path, with their sizes in bytes:
// the page's whole weight.
func Files() map[string]int {
	out := map[string]int{}
	for p, f := range files {
		out[p] = len(f.body)
	}
	return out
}
