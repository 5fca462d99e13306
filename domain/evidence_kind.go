package domain

// IsEvidence reports whether events of type t are evidence of what others
// presented or attempted: a refused presentation, a duplicate delivery, a
// refused write. Evidence changes no execution, capability or lease of its
// operation; it is what a hostile or confused caller can make the ledger
// record. This is the one definition: the console collapses runs of
// evidence into counted groups by it, and a new evidence event type (a
// summary of refusals counted beyond a bound) joins the list here.
func IsEvidence(t string) bool {
	switch t {
	case TypePresentationRejected, TypeDeliveryDuplicated, TypeWriteRefused:
		return true
	}
	return false
}
