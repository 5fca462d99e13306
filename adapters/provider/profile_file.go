package provider

import (
	"errors"
	"fmt"
	"time"

	"opledger/domain"
	"opledger/domain/strictjson"
)

// MaxProfileFileBytes bounds a profile file.
const MaxProfileFileBytes = 64 << 10

// profileFile is a profile file: one JSON object, every field named, none
// optional, nothing else (read by domain/strictjson: exact names, no
// duplicates, no unknown fields, valid UTF-8).
//
//	{
//	  "name": "acme-pay",
//	  "api": "meridian",
//	  "key_retention": "168h",
//	  "replays_saved_errors": false,
//	  "reexecutes_failed": true,
//	  "lookup_by_reference": {"supported": false},
//	  "retrieve_by_key": true,
//	  "key_policy": "per-attempt"
//	}
//
// A pointer is nil when the field is absent or null: both are refused.
type profileFile struct {
	Name               *string            `json:"name"`
	API                *string            `json:"api"`
	KeyRetention       *string            `json:"key_retention"` // a Go duration: "24h", "720h"; "0s": no deduplication
	ReplaysSavedErrors *bool              `json:"replays_saved_errors"`
	ReexecutesFailed   *bool              `json:"reexecutes_failed"`
	LookupByReference  *referenceLookupIn `json:"lookup_by_reference"`
	RetrieveByKey      *bool              `json:"retrieve_by_key"`
	KeyPolicy          *string            `json:"key_policy"` // "per-attempt" or "reuse-first"
}

type referenceLookupIn struct {
	Supported   *bool   `json:"supported"`
	MetadataKey *string `json:"metadata_key"` // required when supported, refused otherwise
}

// ErrProfileFile is wrapped by every ParseProfileFile failure.
var ErrProfileFile = errors.New("provider profile file refused")

// ParseProfileFile reads a profile file (see profileFile) and validates it
// completely: the profile's own rules (domain.ProviderProfile.Validate),
// and that its API has the reads it claims. Every failure names the field
// at fault; all of them are reported at once.
func ParseProfileFile(data []byte) (domain.ProviderProfile, error) {
	if len(data) > MaxProfileFileBytes {
		return domain.ProviderProfile{}, fmt.Errorf("%w: larger than %d bytes", ErrProfileFile, MaxProfileFileBytes)
	}
	var in profileFile
	if err := strictjson.DecodeObject(data, &in, strictjson.Options{}); err != nil {
		return domain.ProviderProfile{}, fmt.Errorf("%w: %w", ErrProfileFile, err)
	}
	var errs []error
	missing := func(field string) { errs = append(errs, fmt.Errorf("field %s is required", field)) }
	var p domain.ProviderProfile
	if in.Name == nil {
		missing("name")
	} else {
		p.Name = *in.Name
	}
	if in.API == nil {
		missing("api")
	} else {
		p.API = *in.API
	}
	if in.KeyRetention == nil {
		missing("key_retention")
	} else if d, err := time.ParseDuration(*in.KeyRetention); err != nil {
		shown, _ := domain.EvidenceText(*in.KeyRetention, 64)
		errs = append(errs, fmt.Errorf("field key_retention: %q is not a duration like \"24h\" or \"720h\"", shown))
	} else {
		p.KeyRetention = d
	}
	for _, b := range []struct {
		field string
		in    *bool
		out   *bool
	}{
		{"replays_saved_errors", in.ReplaysSavedErrors, &p.ReplaysSavedErrors},
		{"reexecutes_failed", in.ReexecutesFailed, &p.ReexecutesFailed},
		{"retrieve_by_key", in.RetrieveByKey, &p.RetrieveByKey},
	} {
		if b.in == nil {
			missing(b.field)
		} else {
			*b.out = *b.in
		}
	}
	switch l := in.LookupByReference; {
	case l == nil:
		missing("lookup_by_reference")
	case l.Supported == nil:
		missing("lookup_by_reference.supported")
	case *l.Supported && (l.MetadataKey == nil || *l.MetadataKey == ""):
		errs = append(errs, errors.New("field lookup_by_reference.metadata_key is required when supported is true"))
	case !*l.Supported && l.MetadataKey != nil:
		errs = append(errs, errors.New("field lookup_by_reference.metadata_key: given, but supported is false"))
	case *l.Supported:
		p.ReferenceField = *l.MetadataKey
	}
	if in.KeyPolicy == nil {
		missing("key_policy")
	} else {
		p.KeyPolicy = domain.KeyPolicy(*in.KeyPolicy)
	}
	if err := errors.Join(errs...); err != nil {
		return domain.ProviderProfile{}, fmt.Errorf("%w: %w", ErrProfileFile, err)
	}
	if err := p.Validate(); err != nil {
		return domain.ProviderProfile{}, fmt.Errorf("%w: %w", ErrProfileFile, err)
	}
	if _, ok := BuiltinProfile(p.Name); ok {
		return domain.ProviderProfile{}, fmt.Errorf("%w: field name: %q is a built-in profile; name yours otherwise", ErrProfileFile, p.Name)
	}
	if _, err := newWire(p); err != nil {
		return domain.ProviderProfile{}, fmt.Errorf("%w: field api: %w", ErrProfileFile, err)
	}
	return p, nil
}
