// Command schemagen writes the decide contract's JSON Schemas,
// request.json and response.json, from the gateway's Go types. It runs
// from go generate in internal/gateway; a test there fails when the
// committed files differ from what it would write.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"system1/internal/gateway"
)

func main() {
	out := flag.String("out", "schema", "folder to write request.json and response.json to")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
	for name, data := range gateway.SchemaFiles() {
		path := filepath.Join(*out, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "schemagen:", err)
			os.Exit(1)
		}
	}
}
