package codec_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/domain/codec/codectest"
	"opledger/eventstore"
)

// BenchmarkDecodeRecorded is the baseline for decoding stored events (one
// parse of the metadata and one of the payload per event): the codec
// against main@f42e6e8's decoder (encoding/json v1, metadata and payload
// decoded by separate calls, unknown fields refused), on one Claimed and
// on the story's whole log (ns/event):
//
//	go test -run '^$' -bench DecodeRecorded -count 5 ./domain/codec/
func BenchmarkDecodeRecorded(b *testing.B) {
	_, log, err := codectest.Log("story-f42e6e8")
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]eventstore.RecordedEvent, len(log))
	var claimed eventstore.RecordedEvent
	for i, e := range log {
		recs[i] = eventstore.RecordedEvent{StreamID: e.Stream, Version: e.Version, ID: e.ID, Type: e.Type, Data: e.Data, Metadata: e.Metadata}
		if e.Type == domain.TypeClaimed {
			claimed = recs[i]
		}
	}
	decoders := []struct {
		name   string
		decode func(eventstore.RecordedEvent) (domain.Event, error)
	}{
		{"codec", func(rec eventstore.RecordedEvent) (domain.Event, error) {
			d, err := codec.DecodeRecorded(rec)
			return d.Event, err
		}},
		{"main-encoding-json-v1", decodeAsMainDid},
	}
	for _, d := range decoders {
		b.Run(d.name+"/claimed", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(claimed.Data) + len(claimed.Metadata)))
			for b.Loop() {
				if _, err := d.decode(claimed); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(d.name+"/story-log", func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				for _, rec := range recs {
					if _, err := d.decode(rec); err != nil {
						b.Fatal(err)
					}
				}
				n += len(recs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/event")
		})
	}
}

// decodeAsMainDid is main@f42e6e8's ledger.DecodeRecorded: the metadata
// with encoding/json, then the payload with a json.Decoder refusing
// unknown fields.
func decodeAsMainDid(rec eventstore.RecordedEvent) (domain.Event, error) {
	var m domain.Metadata
	if len(bytes.TrimSpace(rec.Metadata)) > 0 {
		if err := json.Unmarshal(rec.Metadata, &m); err != nil {
			return nil, err
		}
	}
	if m.SchemaVersion == 0 {
		m.SchemaVersion = 1
	}
	if m.SchemaVersion != 1 {
		return nil, fmt.Errorf("decode %s: schema version %d", rec.Type, m.SchemaVersion)
	}
	k, ok := codec.Lookup(rec.Type)
	if !ok {
		return nil, fmt.Errorf("decode %q: unknown event type", rec.Type)
	}
	v := reflect.New(k.GoType)
	dec := json.NewDecoder(bytes.NewReader(rec.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v.Interface()); err != nil {
		return nil, err
	}
	return v.Elem().Interface().(domain.Event), nil
}
