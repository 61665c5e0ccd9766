package prepare

import (
	"fmt"
	"io"
	"slices"
	"strings"

	jsoniter "github.com/json-iterator/go"
)

// Diagnostic is one named number attached to a sample.
type Diagnostic struct {
	Name  string
	Value float64
}

// Diagnostics is an ordered list of named numbers (a Python Mapping[str,
// float]). The samples an estimator makes share one list of names and take
// their values as rows of one dense matrix: a batch's diagnostics cost two
// allocations, hold no pointers per sample, and cross the C boundary as the
// matrix itself. The zero value is empty.
type Diagnostics struct {
	names  []string
	values []float64
}

// DiagnosticsOf builds diagnostics from pairs, in order.
func DiagnosticsOf(pairs ...Diagnostic) Diagnostics {
	d := Diagnostics{names: make([]string, len(pairs)), values: make([]float64, len(pairs))}
	for i, p := range pairs {
		d.names[i], d.values[i] = p.Name, p.Value
	}
	return d
}

// Len is the number of diagnostics.
func (d Diagnostics) Len() int { return len(d.values) }

// At returns diagnostic i.
func (d Diagnostics) At(i int) Diagnostic { return Diagnostic{d.names[i], d.values[i]} }

// Names returns the names in order, as a new slice.
func (d Diagnostics) Names() []string { return slices.Clone(d.names) }

// Values returns the values in Names order, as a new slice.
func (d Diagnostics) Values() []float64 { return slices.Clone(d.values) }

// SameNames reports whether d and e name the same diagnostics in the same
// order (without comparing strings when both share one list of names).
func (d Diagnostics) SameNames(e Diagnostics) bool {
	if len(d.names) != len(e.names) {
		return false
	}
	if len(d.names) == 0 || &d.names[0] == &e.names[0] {
		return true
	}
	return slices.Equal(d.names, e.names)
}

// AppendValues appends the values in Names order to dst.
func (d Diagnostics) AppendValues(dst []float64) []float64 { return append(dst, d.values...) }

// Get returns the value named name.
func (d Diagnostics) Get(name string) (float64, bool) {
	for i, n := range d.names {
		if n == name {
			return d.values[i], true
		}
	}
	return 0, false
}

// Map returns the diagnostics as a new map.
func (d Diagnostics) Map() map[string]float64 {
	m := make(map[string]float64, len(d.names))
	for i, n := range d.names {
		m[n] = d.values[i]
	}
	return m
}

// String renders the diagnostics as name=value pairs in order.
func (d Diagnostics) String() string {
	var sb strings.Builder
	for i, n := range d.names {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%s=%v", n, d.values[i])
	}
	return sb.String()
}

// MarshalJSON encodes the diagnostics as one JSON object, keys in order.
func (d Diagnostics) MarshalJSON() ([]byte, error) {
	s := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowStream(nil)
	defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnStream(s)
	s.WriteObjectStart()
	for i, n := range d.names {
		if i > 0 {
			s.WriteMore()
		}
		s.WriteObjectField(n)
		s.WriteFloat64(d.values[i])
	}
	s.WriteObjectEnd()
	if s.Error != nil {
		return nil, s.Error
	}
	return append([]byte(nil), s.Buffer()...), nil
}

// UnmarshalJSON reads a JSON object, keeping its key order.
func (d *Diagnostics) UnmarshalJSON(data []byte) error {
	it := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowIterator(data)
	defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnIterator(it)
	var out Diagnostics
	it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
		out.names = append(out.names, key)
		out.values = append(out.values, it.ReadFloat64())
		return true
	})
	if it.Error != nil && it.Error != io.EOF {
		return fmt.Errorf("diagnostics: %w", it.Error)
	}
	*d = out
	return nil
}

// diagMatrix hands out Diagnostics rows of one dense matrix under one list of
// names.
type diagMatrix struct {
	names  []string
	values []float64
}

func newDiagMatrix(names []string, rows int) *diagMatrix {
	return &diagMatrix{names: names, values: make([]float64, 0, rows*len(names))}
}

// row appends one sample's values (in names order) and returns them as
// Diagnostics. The full slice expression keeps an append to one row from
// overwriting the next.
func (m *diagMatrix) row(v ...float64) Diagnostics {
	start := len(m.values)
	m.values = append(m.values, v...)
	return Diagnostics{names: m.names, values: m.values[start:len(m.values):len(m.values)]}
}
