// Command openapigen writes system1's OpenAPI document from the Go types
// it is built from. It runs from go generate in internal/web; a test there
// fails when the committed file differs from what it would write.
package main

import (
	"flag"
	"fmt"
	"os"

	"system1/internal/web"
)

func main() {
	out := flag.String("out", "openapi.json", "file to write the document to")
	flag.Parse()
	if err := os.WriteFile(*out, web.OpenAPI(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "openapigen:", err)
		os.Exit(1)
	}
}
