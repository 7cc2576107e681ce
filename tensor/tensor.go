// Package tensor defines vouch's dense tensor: an element type, a shape and a
// typed Go slice holding the elements in row-major (C) order.
//
// The element types and their numbers are ONNX's (TensorProto.DataType), so a
// DType converts to and from the wire without a table. Each DType has exactly
// one Go slice type for its data:
//
//	Float32 []float32   Float64 []float64   Float16 []Half      BFloat16 []BHalf
//	Int8    []int8      Int16   []int16     Int32   []int32     Int64    []int64
//	Uint8   []uint8     Uint16  []uint16    Uint32  []uint32    Uint64   []uint64
//	Bool    []bool      String  []string
//
// A Tensor whose Data does not have the slice type of its DType, or whose
// length is not the product of its shape, is invalid; Check reports it.
package tensor

import (
	"fmt"
	"strings"
)

// DType is an element type, numbered as ONNX's TensorProto.DataType.
type DType int32

// The element types vouch knows. Numbers are ONNX's.
const (
	Undefined DType = 0
	Float32   DType = 1
	Uint8     DType = 2
	Int8      DType = 3
	Uint16    DType = 4
	Int16     DType = 5
	Int32     DType = 6
	Int64     DType = 7
	String    DType = 8
	Bool      DType = 9
	Float16   DType = 10
	Float64   DType = 11
	Uint32    DType = 12
	Uint64    DType = 13
	BFloat16  DType = 16

	// Sequence marks an ONNX sequence value: Data is []*Tensor and Shape is
	// empty. It has no ONNX data-type number (this one is vouch's own) and
	// never appears in a TensorProto; Supported reports false for it.
	Sequence DType = 1024

	// Map marks an ONNX map value (ai.onnx.ml's DictVectorizer input,
	// ZipMap's output elements): Data is a MapData and Shape is empty. Like
	// Sequence it is vouch's own number, never in a TensorProto, and
	// Supported reports false for it. A sequence may hold maps.
	Map DType = 1025
)

// MapData is the content of a map value: Keys (int64 or string) and Values
// (any tensor dtype), both one-dimensional and of one length; entry i maps
// Keys[i] to Values[i]; where a key repeats, its last entry wins. The order is the producer's
// (ZipMap: the class order), which is also the order the digest and the
// server's JSON see.
type MapData struct {
	Keys, Values *Tensor
}

// NewMap returns a map value with the given keys and values.
func NewMap(keys, values *Tensor) *Tensor {
	return &Tensor{DType: Map, Data: MapData{Keys: keys, Values: values}}
}

// MapOf returns the content of a map value (ok false for anything else).
func (t *Tensor) MapOf() (MapData, bool) {
	m, ok := t.Data.(MapData)
	return m, ok && t.DType == Map
}

var dtypeNames = map[DType]string{
	Undefined: "undefined", Float32: "float32", Uint8: "uint8", Int8: "int8",
	Uint16: "uint16", Int16: "int16", Int32: "int32", Int64: "int64",
	String: "string", Bool: "bool", Float16: "float16", Float64: "float64",
	Uint32: "uint32", Uint64: "uint64", BFloat16: "bfloat16", Sequence: "sequence", Map: "map",
	14: "complex64", 15: "complex128", 17: "float8e4m3fn", 18: "float8e4m3fnuz",
	19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1",
}

func (d DType) String() string {
	if s, ok := dtypeNames[d]; ok {
		return s
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

// ParseDType returns the DType named s (as printed by String).
func ParseDType(s string) (DType, error) {
	for d, n := range dtypeNames {
		if n == s && d.Supported() {
			return d, nil
		}
	}
	return Undefined, fmt.Errorf("tensor: unknown dtype %q", s)
}

// Supported reports whether vouch can hold tensors of this type.
func (d DType) Supported() bool {
	switch d {
	case Float32, Uint8, Int8, Uint16, Int16, Int32, Int64, String, Bool,
		Float16, Float64, Uint32, Uint64, BFloat16:
		return true
	}
	return false
}

// Size is the number of bytes of one element in the little-endian wire
// encoding (0 for String and unsupported types).
func (d DType) Size() int {
	switch d {
	case Bool, Int8, Uint8:
		return 1
	case Int16, Uint16, Float16, BFloat16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	}
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	return d == Float32 || d == Float64 || d == Float16 || d == BFloat16
}

// IsInt reports whether d is an integer type (signed or unsigned).
func (d DType) IsInt() bool {
	switch d {
	case Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64:
		return true
	}
	return false
}

// IsSigned reports whether d is a signed integer or floating-point type.
func (d DType) IsSigned() bool {
	switch d {
	case Int8, Int16, Int32, Int64:
		return true
	}
	return d.IsFloat()
}

// Tensor is a dense, row-major tensor. A scalar has an empty (or nil) Shape
// and one element.
type Tensor struct {
	DType DType
	Shape []int
	Data  any
}

// NumElems returns the product of shape (1 for a scalar).
func NumElems(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Len returns the number of elements.
func (t *Tensor) Len() int { return NumElems(t.Shape) }

// Rank returns len(t.Shape).
func (t *Tensor) Rank() int { return len(t.Shape) }

// New returns a zero-filled tensor of the given type and shape. The shape is
// copied. It panics on an unsupported dtype or negative dimension (programmer
// errors); callers decoding outside data must check first.
func New(dt DType, shape ...int) *Tensor {
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("tensor: negative dimension in %v", shape))
		}
	}
	n := NumElems(shape)
	return &Tensor{DType: dt, Shape: append([]int{}, shape...), Data: MakeSlice(dt, n)}
}

// MakeSlice returns a zeroed slice of n elements of dt's Go type.
func MakeSlice(dt DType, n int) any {
	switch dt {
	case Float32:
		return make([]float32, n)
	case Float64:
		return make([]float64, n)
	case Float16:
		return make([]Half, n)
	case BFloat16:
		return make([]BHalf, n)
	case Int8:
		return make([]int8, n)
	case Int16:
		return make([]int16, n)
	case Int32:
		return make([]int32, n)
	case Int64:
		return make([]int64, n)
	case Uint8:
		return make([]uint8, n)
	case Uint16:
		return make([]uint16, n)
	case Uint32:
		return make([]uint32, n)
	case Uint64:
		return make([]uint64, n)
	case Bool:
		return make([]bool, n)
	case String:
		return make([]string, n)
	}
	panic(fmt.Sprintf("tensor: unsupported dtype %v", dt))
}

// DTypeOf returns the DType whose Go slice type is that of data, or Undefined.
func DTypeOf(data any) DType {
	switch data.(type) {
	case []float32:
		return Float32
	case []float64:
		return Float64
	case []Half:
		return Float16
	case []BHalf:
		return BFloat16
	case []int8:
		return Int8
	case []int16:
		return Int16
	case []int32:
		return Int32
	case []int64:
		return Int64
	case []uint8:
		return Uint8
	case []uint16:
		return Uint16
	case []uint32:
		return Uint32
	case []uint64:
		return Uint64
	case []bool:
		return Bool
	case []string:
		return String
	}
	return Undefined
}

// From wraps data (one of the slice types above) with a shape; the dtype is
// taken from the slice type. It panics if the length does not match.
func From(data any, shape ...int) *Tensor {
	t := &Tensor{DType: DTypeOf(data), Shape: append([]int{}, shape...), Data: data}
	if err := t.Check(); err != nil {
		panic(err)
	}
	return t
}

// Scalar returns a rank-0 tensor holding v.
func Scalar[T any](v T) *Tensor {
	return From([]T{v})
}

// Check reports whether t is well formed: a supported dtype, Data of the
// dtype's slice type, non-negative dims and a matching length.
func (t *Tensor) Check() error {
	if t == nil {
		return fmt.Errorf("tensor: nil tensor")
	}
	if t.DType == Sequence {
		elems, ok := t.Data.([]*Tensor)
		if !ok || len(t.Shape) != 0 {
			return fmt.Errorf("tensor: a sequence holds []*Tensor and has no shape, got %T %v", t.Data, t.Shape)
		}
		for i, e := range elems {
			if e == nil || e.DType == Sequence {
				return fmt.Errorf("tensor: sequence element %d is nil or nested", i)
			}
			if e.DType == Map {
				if err := e.Check(); err != nil {
					return fmt.Errorf("tensor: sequence element %d: %w", i, err)
				}
				continue
			}
			if err := e.Check(); err != nil {
				return fmt.Errorf("tensor: sequence element %d: %w", i, err)
			}
		}
		return nil
	}
	if t.DType == Map {
		return t.checkMap()
	}
	if !t.DType.Supported() {
		return fmt.Errorf("tensor: unsupported dtype %v", t.DType)
	}
	if got := DTypeOf(t.Data); got != t.DType {
		return fmt.Errorf("tensor: data is %T, dtype %v", t.Data, t.DType)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("tensor: negative dimension in shape %v", t.Shape)
		}
	}
	if n := sliceLen(t.Data); n != t.Len() {
		return fmt.Errorf("tensor: %d elements for shape %v (want %d)", n, t.Shape, t.Len())
	}
	return nil
}

func sliceLen(data any) int {
	switch d := data.(type) {
	case []float32:
		return len(d)
	case []float64:
		return len(d)
	case []Half:
		return len(d)
	case []BHalf:
		return len(d)
	case []int8:
		return len(d)
	case []int16:
		return len(d)
	case []int32:
		return len(d)
	case []int64:
		return len(d)
	case []uint8:
		return len(d)
	case []uint16:
		return len(d)
	case []uint32:
		return len(d)
	case []uint64:
		return len(d)
	case []bool:
		return len(d)
	case []string:
		return len(d)
	}
	return -1
}

func (t *Tensor) checkMap() error {
	m, ok := t.Data.(MapData)
	if !ok || len(t.Shape) != 0 {
		return fmt.Errorf("tensor: a map holds MapData and has no shape, got %T %v", t.Data, t.Shape)
	}
	if m.Keys == nil || m.Values == nil {
		return fmt.Errorf("tensor: map without keys or values")
	}
	if m.Keys.DType != Int64 && m.Keys.DType != String {
		return fmt.Errorf("tensor: map keys are %v (int64 or string only)", m.Keys.DType)
	}
	for _, part := range []*Tensor{m.Keys, m.Values} {
		if err := part.Check(); err != nil {
			return fmt.Errorf("tensor: map: %w", err)
		}
		if len(part.Shape) != 1 {
			return fmt.Errorf("tensor: map keys and values are one-dimensional, got shape %v", part.Shape)
		}
	}
	if m.Keys.Shape[0] != m.Values.Shape[0] {
		return fmt.Errorf("tensor: map has %d keys and %d values", m.Keys.Shape[0], m.Values.Shape[0])
	}
	return nil
}

// NewSequence returns a sequence value holding elems.
func NewSequence(elems []*Tensor) *Tensor {
	return &Tensor{DType: Sequence, Data: elems}
}

// Elems returns the elements of a sequence value (nil for a tensor).
func (t *Tensor) Elems() []*Tensor {
	e, _ := t.Data.([]*Tensor)
	return e
}

// Clone returns a deep copy of t.
func (t *Tensor) Clone() *Tensor {
	if t.DType == Sequence {
		elems := make([]*Tensor, len(t.Elems()))
		for i, e := range t.Elems() {
			elems[i] = e.Clone()
		}
		return NewSequence(elems)
	}
	if m, ok := t.MapOf(); ok {
		return NewMap(m.Keys.Clone(), m.Values.Clone())
	}
	c := New(t.DType, t.Shape...)
	copySlice(c.Data, t.Data)
	return c
}

// Reshaped returns a tensor sharing t's data with a new shape of the same
// number of elements.
func (t *Tensor) Reshaped(shape ...int) *Tensor {
	if NumElems(shape) != t.Len() {
		panic(fmt.Sprintf("tensor: cannot reshape %v to %v", t.Shape, shape))
	}
	return &Tensor{DType: t.DType, Shape: append([]int{}, shape...), Data: t.Data}
}

func copySlice(dst, src any) {
	switch d := dst.(type) {
	case []float32:
		copy(d, src.([]float32))
	case []float64:
		copy(d, src.([]float64))
	case []Half:
		copy(d, src.([]Half))
	case []BHalf:
		copy(d, src.([]BHalf))
	case []int8:
		copy(d, src.([]int8))
	case []int16:
		copy(d, src.([]int16))
	case []int32:
		copy(d, src.([]int32))
	case []int64:
		copy(d, src.([]int64))
	case []uint8:
		copy(d, src.([]uint8))
	case []uint16:
		copy(d, src.([]uint16))
	case []uint32:
		copy(d, src.([]uint32))
	case []uint64:
		copy(d, src.([]uint64))
	case []bool:
		copy(d, src.([]bool))
	case []string:
		copy(d, src.([]string))
	}
}

// Strides returns the row-major element strides of shape.
func Strides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// ShapeString formats a shape as "[2 3 4]" ("[]" for a scalar).
func ShapeString(shape []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte(']')
	return b.String()
}

func (t *Tensor) String() string {
	return fmt.Sprintf("%v%s", t.DType, ShapeString(t.Shape))
}
