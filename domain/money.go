package domain

import (
	"fmt"
	"strings"
)

// zeroDecimal lists the ISO 4217 currencies without minor units: their
// amounts in minor units are whole amounts.
var zeroDecimal = map[string]bool{"BIF": true, "CLP": true, "DJF": true, "GNF": true, "ISK": true, "JPY": true,
	"KMF": true, "KRW": true, "PYG": true, "RWF": true, "UGX": true, "VND": true, "VUV": true, "XAF": true, "XOF": true, "XPF": true}

// FormatMoney renders an amount in minor units as people write it: 12000
// EUR is "120.00 EUR", 12000 JPY is "12000 JPY", -5 EUR is "-0.05 EUR".
// The audit's timeline and diff and the console show amounts through it.
func FormatMoney(minor int64, currency string) string {
	if zeroDecimal[strings.ToUpper(currency)] {
		return fmt.Sprintf("%d %s", minor, currency)
	}
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	return fmt.Sprintf("%s%d.%02d %s", sign, minor/100, minor%100, currency)
}
