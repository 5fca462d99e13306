package kurrent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"opledger/eventstore"
)

// ErrStreamDeleted means the stream was deleted or tombstoned on the server
// (by a tool outside opledger): it can be neither read nor appended to.
var ErrStreamDeleted = errors.New("stream deleted")

// errCallTimeout is the cause of a call that got no answer within
// Config.CallTimeout.
var errCallTimeout = errors.New("no answer within the call timeout")

// errConnectTimeout is the failure of a probe that got no answer within
// Config.ConnectTimeout.
var errConnectTimeout = errors.New("no connection within the connect timeout")

// errConnectionLost is the failure of a call whose freshly probed client
// was retired (its connection failed) before the call could use it.
var errConnectionLost = errors.New("connection lost right after connecting")

// errClosed is the failure of a call on a closed store.
var errClosed = errors.New("store closed")

// interpretError is the one place where client, gRPC and context errors
// become the port's errors; nothing above it sees a raw client error class
// it must know. op names the call ("append operation-OP-1", "read all") and
// prefixes the message. The cause stays in the chain (errors.As reaches the
// *esdb.Error).
//
//   - a wrong expected version wraps eventstore.ErrWrongExpectedVersion
//     (Append turns it into a *WrongExpectedVersionError);
//   - a deleted or tombstoned stream wraps ErrStreamDeleted;
//   - anything meaning the server could not be reached or the outcome is
//     unknown (see isConnectionFailure), and a closed store, wrap
//     eventstore.ErrUnavailable;
//   - anything else (access denied, a malformed request) is wrapped as it
//     is.
func interpretError(op string, err error) error {
	if err == nil {
		return nil
	}
	var esErr *esdb.Error
	if errors.As(err, &esErr) {
		switch esErr.Code() {
		case esdb.ErrorCodeWrongExpectedVersion:
			return fmt.Errorf("%s: %w: %w", op, eventstore.ErrWrongExpectedVersion, err)
		case esdb.ErrorCodeStreamDeleted:
			return fmt.Errorf("%s: %w: %w", op, ErrStreamDeleted, err)
		}
	}
	if errors.Is(err, errClosed) || isConnectionFailure(err) {
		return eventstore.Unavailable(op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isConnectionFailure reports whether err means that the server could not
// be reached, that the connection broke, or that no answer came in time: the
// outcome of the call is unknown and the client that made it may be broken.
func isConnectionFailure(err error) bool {
	switch {
	case errors.Is(err, errCallTimeout), errors.Is(err, errConnectTimeout), errors.Is(err, errConnectionLost):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	}
	var esErr *esdb.Error
	if errors.As(err, &esErr) {
		switch esErr.Code() {
		case esdb.ErrorUnavailable, esdb.ErrorCodeConnectionClosed, esdb.ErrorCodeDeadlineExceeded,
			esdb.ErrorCodeNotLeader, esdb.ErrorAborted:
			return true
		}
	}
	// The client passes some gRPC errors up unwrapped (a failed Read call)
	// and files others under ErrorCodeUnknown (a cancelled one).
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded, codes.Aborted:
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// isNotFound reports whether err is the client's answer for a read of a
// stream that holds no events.
func isNotFound(err error) bool {
	var esErr *esdb.Error
	return errors.As(err, &esErr) && esErr.Code() == esdb.ErrorCodeResourceNotFound
}

// isRefusedAppend reports whether the server refused an append as
// malformed or too large (gRPC InvalidArgument): nothing was written.
func isRefusedAppend(err error) bool {
	return status.Code(err) == codes.InvalidArgument
}
