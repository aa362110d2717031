//go:build !unix

package fakeengine

import "errors"

// heldPort holds no port where there are no Unix sockets to bind: a
// refusing fake's port is free again, as a closed listener's is.
type heldPort struct{}

func holdPort(int) (*heldPort, error) { return nil, errors.New("no port held on this system") }

func (*heldPort) Port() int { return 0 }

func (*heldPort) Close() error { return nil }
