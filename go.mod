module system1

go 1.26.8

require (
	github.com/modelcontextprotocol/go-sdk v1.8.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/time v0.16.0 // indirect
)
