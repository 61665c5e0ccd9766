package export

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// Blob is the one binary format batches cross the C boundary in: named
// sections of fixed-size little-endian values, each starting at an 8-byte
// aligned offset of one buffer, plus a Layout that names every section's byte
// offset and element count next to the blob's metadata. The Python wrapper
// reads a section as a memoryview slice of the buffer (no copy, no parsing).
//
// A Blob is a plan: sections are added as references to the caller's slices
// and written only by WriteTo, straight into the destination buffer (the C
// allocation), so no Go-side copy of the data is made. The referenced slices
// must not change until WriteTo returns.
type Blob struct {
	parts []blobPart
	// Meta is the blob's metadata; Layout adds "sections" to it.
	Meta map[string]any
	// sections and size are computed on first use (after the last add).
	sections map[string]Section
	size     int
}

// Section is where one section lies in a blob's buffer: its byte offset and
// its number of elements.
type Section struct {
	Offset int `json:"offset"`
	Count  int `json:"count"`
}

type blobPart struct {
	name     string
	count    int
	elemSize int
	write    func(dst []byte)
}

// blobAlign is every section's offset alignment in bytes.
const blobAlign = 8

// newBlob starts a blob with the given metadata (nil for none).
func newBlob(meta map[string]any) *Blob {
	if meta == nil {
		meta = map[string]any{}
	}
	return &Blob{Meta: meta}
}

// add plans a section of count elements of elemSize bytes, written by write
// into exactly count*elemSize bytes.
func (b *Blob) add(name string, count, elemSize int, write func(dst []byte)) {
	b.parts = append(b.parts, blobPart{name, count, elemSize, write})
	b.sections = nil
}

func (b *Blob) plan() {
	if b.sections != nil {
		return
	}
	b.sections = make(map[string]Section, len(b.parts))
	size := 0
	for _, p := range b.parts {
		size = (size + blobAlign - 1) &^ (blobAlign - 1)
		b.sections[p.name] = Section{size, p.count}
		size += p.count * p.elemSize
	}
	b.size = size
}

// Size is the byte length of the blob's buffer.
func (b *Blob) Size() int {
	b.plan()
	return b.size
}

// Sections is every section's place in the buffer, by name.
func (b *Blob) Sections() map[string]Section {
	b.plan()
	return b.sections
}

// Layout is the blob's metadata plus "sections": what the reader of the
// buffer gets as JSON beside it.
func (b *Blob) Layout() map[string]any {
	out := make(map[string]any, len(b.Meta)+1)
	for k, v := range b.Meta {
		out[k] = v
	}
	out["sections"] = b.Sections()
	return out
}

// WriteTo writes every section into dst, which holds at least Size bytes.
// Padding between sections is left as dst had it.
func (b *Blob) WriteTo(dst []byte) {
	b.plan()
	for _, p := range b.parts {
		off := b.sections[p.name].Offset
		p.write(dst[off : off+p.count*p.elemSize])
	}
}

// Buffer is the blob written into a new Go buffer (tests, Go callers).
func (b *Blob) Buffer() []byte {
	dst := make([]byte, b.Size())
	b.WriteTo(dst)
	return dst
}

// littleEndian: the reader takes every section in the host's byte order,
// which on every platform Go supports with cgo here is little-endian; there a
// section is one copy of the Go slice's memory.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// rawBytes is the memory of v as bytes.
func rawBytes[T any](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(v[0])))
}

// Uint32s adds a section of uint32 values (struct format "I").
func (b *Blob) Uint32s(name string, v []uint32) {
	b.add(name, len(v), 4, func(d []byte) {
		if littleEndian {
			copy(d, rawBytes(v))
			return
		}
		for i, x := range v {
			binary.LittleEndian.PutUint32(d[4*i:], x)
		}
	})
}

// Int32s adds a section of int32 values (struct format "i").
func (b *Blob) Int32s(name string, v []int32) {
	b.add(name, len(v), 4, func(d []byte) {
		if littleEndian {
			copy(d, rawBytes(v))
			return
		}
		for i, x := range v {
			binary.LittleEndian.PutUint32(d[4*i:], uint32(x))
		}
	})
}

// Int64s adds a section of int64 values (struct format "q").
func (b *Blob) Int64s(name string, v []int64) {
	b.add(name, len(v), 8, func(d []byte) {
		if littleEndian {
			copy(d, rawBytes(v))
			return
		}
		for i, x := range v {
			binary.LittleEndian.PutUint64(d[8*i:], uint64(x))
		}
	})
}

// Float64s adds a section of float64 values (struct format "d"), bit for bit.
func (b *Blob) Float64s(name string, v []float64) {
	b.add(name, len(v), 8, func(d []byte) {
		if littleEndian {
			copy(d, rawBytes(v))
			return
		}
		for i, x := range v {
			binary.LittleEndian.PutUint64(d[8*i:], math.Float64bits(x))
		}
	})
}

// Bools adds a section of one byte per value, 0 or 1 (a Go bool's own
// representation; struct format "?").
func (b *Blob) Bools(name string, v []bool) {
	b.add(name, len(v), 1, func(d []byte) { copy(d, rawBytes(v)) })
}

// Raw adds a section of raw bytes (UTF-8 text; struct format "B").
func (b *Blob) Raw(name string, v []byte) {
	b.add(name, len(v), 1, func(d []byte) { copy(d, v) })
}
