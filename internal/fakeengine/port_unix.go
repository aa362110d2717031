//go:build unix

package fakeengine

import (
	"fmt"
	"syscall"
)

// heldPort is a TCP port on the loopback, bound and not listening: a
// connection to it is refused, and no other server can take it.
type heldPort struct{ fd int }

// holdPort binds port on 127.0.0.1 without listening; port 0 takes one
// the system picks. SO_REUSEADDR is on for the bind, so that it can take
// the port of a listener just closed whose accepted connections linger in
// TIME_WAIT, and off after it: a socket bound with it on lets any other
// that has it (every Go listener) listen on the same port.
func holdPort(port int) (*heldPort, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, fmt.Errorf("holding port %d: %w", port, err)
	}
	syscall.CloseOnExec(fd)
	if err = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err == nil {
		err = syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
	}
	if err == nil {
		err = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 0)
	}
	if err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("holding port %d: %w", port, err)
	}
	return &heldPort{fd}, nil
}

// Port is the port held.
func (h *heldPort) Port() int {
	if sa, err := syscall.Getsockname(h.fd); err == nil {
		if in, ok := sa.(*syscall.SockaddrInet4); ok {
			return in.Port
		}
	}
	return 0
}

// Close lets the port go.
func (h *heldPort) Close() error { return syscall.Close(h.fd) }
