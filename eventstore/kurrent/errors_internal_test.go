package kurrent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"opledger/eventstore"
)

func TestInterpretError(t *testing.T) {
	require.NoError(t, interpretError("op", nil))

	unavailable := []error{
		errClosed,
		fmt.Errorf("%w (1s)", errCallTimeout),
		fmt.Errorf("connect: %w (1s)", errConnectTimeout),
		context.Canceled,
		context.DeadlineExceeded,
		io.EOF,
		status.Error(codes.Unavailable, "connection refused"),
		fmt.Errorf("wrapped: %w", status.Error(codes.Canceled, "context canceled")),
		status.Error(codes.DeadlineExceeded, "deadline"),
		status.Error(codes.Aborted, "aborted"),
	}
	for _, err := range unavailable {
		got := interpretError("read all", err)
		require.ErrorIs(t, got, eventstore.ErrUnavailable, "%v", err)
		require.ErrorContains(t, got, "read all")
		require.ErrorIs(t, got, err, "the cause stays in the chain")
	}

	plain := []error{
		errors.New("something else"),
		status.Error(codes.PermissionDenied, "access denied"),
		status.Error(codes.InvalidArgument, "Maximum Append Size of 1048576 Exceeded."),
	}
	for _, err := range plain {
		got := interpretError("append s", err)
		require.NotErrorIs(t, got, eventstore.ErrUnavailable, "%v", err)
		require.NotErrorIs(t, got, eventstore.ErrWrongExpectedVersion, "%v", err)
		require.ErrorIs(t, got, err)
	}
	require.True(t, isRefusedAppend(fmt.Errorf("x: %w", status.Error(codes.InvalidArgument, "too big"))))
	require.False(t, isRefusedAppend(status.Error(codes.Unavailable, "down")))
}
