package wire

import (
	"bufio"
	"io"
	"sync"
)

// A Reader reads its body through a buffer of two sizes. While the body
// arrives no faster than the Reader decodes it (a model streaming its
// reply), every read finds a few events at most, and a Reader that waits
// for the next one holds only its small buffer: a conversation in the
// middle of a stream, or many of them, costs little heap. When the body
// arrives faster (a reply sent at once, or a Reader that fell behind), a
// read that fills all the room it had moves the Reader to a big buffer,
// borrowed from a small pool, until it has caught up: one read(2) then
// brings bigSize bytes instead of smallSize (a bufio.Reader under the body,
// such as net/http's per connection, hands a read at least as large as its
// own buffer straight to the socket), which is most of the CPU a delta
// costs when the body is there already.
const (
	smallSize = 1 << 10
	bigSize   = 16 << 10
)

// maxIdleBig bounds the big buffers kept for the next Reader that falls
// behind: a few streams fall behind at once, not thousands, and buffers
// beyond these are left to the garbage collector.
const maxIdleBig = 4

// idleBig holds the big buffers no Reader uses.
var idleBig struct {
	sync.Mutex
	n    int
	bufs [maxIdleBig][]byte
}

func getBig() []byte {
	idleBig.Lock()
	defer idleBig.Unlock()
	if idleBig.n == 0 {
		return make([]byte, bigSize)
	}
	idleBig.n--
	b := idleBig.bufs[idleBig.n]
	idleBig.bufs[idleBig.n] = nil
	return b
}

func putBig(b []byte) {
	idleBig.Lock()
	defer idleBig.Unlock()
	if idleBig.n < maxIdleBig {
		idleBig.bufs[idleBig.n] = b
		idleBig.n++
	}
}

// buffer is a Reader's read buffer: the part of bufio.Reader's methods the
// Reader uses, over a buffer that is small or big as said above. The
// zero value is not usable: see newBuffer.
type buffer struct {
	src    io.Reader
	small  []byte // the Reader's own buffer, smallSize bytes
	buf    []byte // small, or a big buffer from idleBig
	r, w   int    // buf[r:w] holds what was read and not discarded
	behind bool   // the last read filled all the room it had
	err    error  // the read error that ended src, sticky
}

func newBuffer(src io.Reader) buffer {
	small := make([]byte, smallSize)
	return buffer{src: src, small: small, buf: small}
}

// Buffered returns how many bytes can be read without reading src.
func (b *buffer) Buffered() int { return b.w - b.r }

// Size returns the size of the buffer in use, which a line longer than it
// cannot fit in.
func (b *buffer) Size() int { return len(b.buf) }

// Discard skips the next n buffered bytes; n is at most Buffered().
func (b *buffer) Discard(n int) {
	b.r += n
	if b.r == b.w {
		b.r, b.w = 0, 0
	}
}

// Peek returns the next n bytes without discarding them, reading src until
// they are there, its end or an error; it returns fewer than n bytes with
// the error that stopped it, or with bufio.ErrBufferFull when n is larger
// than Size(). The slice is valid until the next call.
func (b *buffer) Peek(n int) ([]byte, error) {
	for b.w-b.r < n && b.w-b.r < len(b.buf) && b.err == nil {
		b.fill()
	}
	switch {
	case n > len(b.buf):
		return b.buf[b.r:b.w], bufio.ErrBufferFull
	case b.w-b.r < n:
		return b.buf[b.r:b.w], b.err
	}
	return b.buf[b.r : b.r+n], nil
}

// Read reads what is buffered, or from src when nothing is.
func (b *buffer) Read(p []byte) (int, error) {
	if b.r == b.w {
		if b.err != nil {
			return 0, b.err
		}
		return b.src.Read(p)
	}
	n := copy(p, b.buf[b.r:b.w])
	b.Discard(n)
	return n, nil
}

// fill reads src once into the buffer, after moving what is buffered to
// its start and choosing the buffer's size.
func (b *buffer) fill() {
	if b.r > 0 {
		copy(b.buf, b.buf[b.r:b.w])
		b.w -= b.r
		b.r = 0
	}
	b.resize()
	for range 100 {
		room := len(b.buf) - b.w
		n, err := b.src.Read(b.buf[b.w:])
		b.w += n
		if err != nil {
			b.err = err
			return
		}
		if n > 0 {
			b.behind = n == room
			return
		}
	}
	b.err = io.ErrNoProgress
}

// resize moves the buffered bytes (at the start of buf) to the big buffer
// when the last read filled all its room, and back to the small one once a
// read did not and they fit in it with room for more (a Peek of one byte
// more than is buffered must not find the buffer too small).
func (b *buffer) resize() {
	big := len(b.buf) != len(b.small)
	switch {
	case b.behind && !big:
		nb := getBig()
		copy(nb, b.buf[:b.w])
		b.buf = nb
	case !b.behind && big && b.w < len(b.small):
		copy(b.small, b.buf[:b.w])
		putBig(b.buf)
		b.buf = b.small
	}
}

// release hands the big buffer back, if the buffer holds one and what it
// holds fits in the small one.
func (b *buffer) release() {
	if len(b.buf) == len(b.small) || b.w-b.r >= len(b.small) {
		return
	}
	n := copy(b.small, b.buf[b.r:b.w])
	putBig(b.buf)
	b.buf, b.r, b.w = b.small, 0, n
	b.behind = false
}

// grow moves the buffered bytes to a big buffer when the small one is in
// use, and reports whether it did: a line longer than the small buffer
// goes on there before it is set aside.
func (b *buffer) grow() bool {
	if len(b.buf) != len(b.small) {
		return false
	}
	nb := getBig()
	b.w = copy(nb, b.buf[b.r:b.w])
	b.r = 0
	b.buf = nb
	return true
}
