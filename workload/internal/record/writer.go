// Package record writes cpulab's output: JSON lines, one object per line,
// each with a "type" key (see docs/RECORDS.md).
package record

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"sync"
)

// Writer writes records as JSON lines. It is safe for concurrent use; each
// record is one whole line.
type Writer struct {
	mu        sync.Mutex
	buf       *bufio.Writer
	enc       *json.Encoder
	autoFlush bool
}

// NewWriter returns a Writer on w. With autoFlush every record reaches w at
// once (rare records that a reader may wait for, such as "listening");
// without it records are buffered until Flush (per-request records).
func NewWriter(w io.Writer, autoFlush bool) *Writer {
	buf := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return &Writer{buf: buf, enc: enc, autoFlush: autoFlush}
}

// Write encodes rec (a struct or map with a "type" key) as one line.
func (w *Writer) Write(rec any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.enc.Encode(rec); err != nil {
		return err
	}
	if w.autoFlush {
		return w.buf.Flush()
	}
	return nil
}

// Flush writes any buffered records.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Flush()
}

// Num returns v as a JSON number, or nil (null) when v is NaN or infinite,
// which JSON cannot represent (a quantile of no samples, a rate over no time).
func Num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// Ms rounds a millisecond value to the microsecond: finer digits are noise
// and only lengthen per-request records.
func Ms(v float64) float64 { return math.Round(v*1000) / 1000 }

// MsNum is Num of a millisecond value rounded to the microsecond, for
// summary fields.
func MsNum(v float64) *float64 { return Num(Ms(v)) }
