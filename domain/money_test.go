package domain_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
)

func TestFormatMoney(t *testing.T) {
	t.Parallel()
	for minor, want := range map[int64]string{12000: "120.00 EUR", 5: "0.05 EUR", -5: "-0.05 EUR", -12345: "-123.45 EUR", 0: "0.00 EUR"} {
		require.Equal(t, want, domain.FormatMoney(minor, "EUR"))
	}
	require.Equal(t, "12000 JPY", domain.FormatMoney(12000, "JPY"))
	require.Equal(t, "12000 jpy", domain.FormatMoney(12000, "jpy"), "a zero-decimal currency in any case")
}
