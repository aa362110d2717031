// Package helm tests the Helm chart in deploy/helm/system1. It is a
// module of its own so that the Kubernetes API's Go types, which only
// these tests decode into, are neither downloaded nor compiled by the
// rest of the suite; scripts/test.sh runs it as a separate step.
package helm
