// Package codec is the one place that reads and writes events: the JSON of
// every event type and of its metadata, every version of it ever written,
// and how an older version becomes the current one.
//
// The registry (registry.go) is one table with a row per event type: its
// stable name, its Go type (the current shape), what it records, its
// versions with their upcasters, and the version this build writes. The
// codec is built from it; the coverage test (coverage_test.go) holds every
// consumer of events (Evolve, the read models, audit verify, the timeline,
// the provider diff, the recovery index) to an explicit case for every row.
//
// The compatibility policy (docs/design.md, "Event compatibility"):
//
//   - A reader accepts every version of a type from 1 to the current one and
//     upcasts it to the current shape, here and nowhere else. A version
//     newer than it knows is refused as ErrNewerVersion ("written by a newer
//     build"), a type it does not know as ErrUnknownEventType: never misread.
//   - Within a version a reader ignores members it does not know (a newer
//     build's additive, optional field) and says so (Decoded.Ignored); it
//     never writes back what it did not understand. Everything else is read
//     strictly: exact names, no duplicates, valid UTF-8, one JSON object,
//     every known member of its type.
//   - A writer writes Kind.Write, which a release raises only after a
//     release that reads the new version is everywhere: readers first.
//
// Decoding parses the metadata and the payload of an event once each. What
// is in the shape this build's writers and PostgreSQL's jsonb give it (known
// members once, strings without escapes, small integers, UTC times: nearly
// every stored event) is read by a parser of that shape alone
// (metadata_fast.go; payload_fast.go, a plan per registered struct built
// once), which reads exactly what the strict decoder reads, as the fuzz tests
// FuzzFastMetadataAgreesWithReadObject and
// FuzzFastPayloadAgreesWithReadObject check. Everything else goes to
// github.com/go-json-experiment/json (encoding/json/v2's semantics): a
// strict first pass, and only when that meets an unknown member a tolerant
// second one; only a refused event is read again, by domain/strictjson, to
// explain precisely what is wrong. Encoding uses encoding/json, so a
// version's bytes stay exactly what that version's writer stored
// (BenchmarkDecodeRecorded, TestGolden).
package codec
