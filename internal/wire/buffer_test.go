package wire

import (
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// contentFrame is an SSE event whose delta carries s.
func contentFrame(s string) string {
	return `data: {"choices":[{"index":0,"delta":{"content":"` + s + `"}}]}` + "\n\n"
}

// countingReader counts the reads of the reader under it.
type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// chunkReader hands out its body in reads of sizes from sizes, in turn,
// whatever room the caller gives: a network that delivers a stream in
// pieces of its own.
type chunkReader struct {
	body  string
	sizes []int
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.body == "" {
		return 0, io.EOF
	}
	n := min(c.sizes[c.i%len(c.sizes)], len(p), len(c.body))
	c.i++
	copy(p, c.body[:n])
	c.body = c.body[n:]
	return n, nil
}

// A body that arrives at once is read in big pieces: the Reader moves to
// its big buffer after its first full read and stays there until the end.
func TestBufferBodyAtOnce(t *testing.T) {
	var b strings.Builder
	const events = 2000
	for i := range events {
		b.WriteString(contentFrame("word" + strconv.Itoa(i) + " "))
	}
	b.WriteString("data: [DONE]\n\n")
	body := b.String()
	src := &countingReader{r: strings.NewReader(body)}
	r := NewReader(src)
	got := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got++
	}
	if got != events {
		t.Fatalf("%d deltas, want %d", got, events)
	}
	// One read of the small buffer, then big ones; a few more for the
	// pieces left at the end of each.
	if most := 2*len(body)/bigSize + 4; src.reads > most {
		t.Errorf("%d reads for a body of %d bytes, want at most %d", src.reads, len(body), most)
	}
	r.Release()
	if r.br.Size() != smallSize {
		t.Errorf("after Release the Reader holds %d bytes of buffer, want %d", r.br.Size(), smallSize)
	}
}

// A body that arrives an event at a time, as a model streams it, is read
// in the small buffer all along: a Reader waiting for the next event holds
// no more.
func TestBufferStreamStaysSmall(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewReader(pr)
	go func() {
		for i := range 50 {
			pw.Write([]byte(contentFrame("w" + strconv.Itoa(i))))
		}
		pw.Write([]byte("data: [DONE]\n\n"))
		pw.Close()
	}()
	for i := 0; ; i++ {
		d, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := "w" + strconv.Itoa(i); d.Content != want {
			t.Fatalf("delta %d: %q, want %q", i, d.Content, want)
		}
		if r.br.Size() != smallSize {
			t.Fatalf("after delta %d the Reader reads into %d bytes, want its small buffer (%d)", i, r.br.Size(), smallSize)
		}
	}
}

// A body that comes fast and then slowly moves to the big buffer and back:
// the big one is held only while the Reader is behind.
func TestBufferBackToSmall(t *testing.T) {
	var fast strings.Builder
	for i := range 500 {
		fast.WriteString(contentFrame("f" + strconv.Itoa(i)))
	}
	pr, pw := io.Pipe()
	r := NewReader(pr)
	go func() {
		pw.Write([]byte(fast.String()))
		for i := range 3 {
			pw.Write([]byte(contentFrame("s" + strconv.Itoa(i))))
		}
		pw.Write([]byte("data: [DONE]\n\n"))
		pw.Close()
	}()
	wasBig := false
	for {
		d, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.br.Size() == bigSize {
			wasBig = true
		}
		if strings.HasPrefix(d.Content, "s") && r.br.Size() != smallSize {
			t.Fatalf("at %q, when the body comes an event at a time, the Reader reads into %d bytes, want %d", d.Content, r.br.Size(), smallSize)
		}
	}
	if !wasBig {
		t.Error("the Reader never used its big buffer for a body written at once")
	}
}

// Events of every length around the two buffer sizes decode the same
// whatever pieces the body arrives in.
func TestBufferLongLines(t *testing.T) {
	frameLen := len(contentFrame(""))
	var want []string
	var b strings.Builder
	for _, size := range []int{smallSize, bigSize, 3 * bigSize} {
		for _, d := range []int{-2, -1, 0, 1, 2} {
			n := max(size-frameLen+d, 1)
			s := strings.Repeat(string(rune('a'+len(want)%26)), n)
			want = append(want, s)
			b.WriteString(contentFrame(s))
			b.WriteString(contentFrame("x"))
			want = append(want, "x")
		}
	}
	b.WriteString("data: [DONE]\n\n")
	body := b.String()
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]int, 64)
	for i := range random {
		random[i] = 1 + rng.IntN(3*bigSize)
	}
	sources := map[string]func() io.Reader{
		"whole":    func() io.Reader { return strings.NewReader(body) },
		"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
		"half":     func() io.Reader { return iotest.HalfReader(strings.NewReader(body)) },
		"random":   func() io.Reader { return &chunkReader{body: body, sizes: random} },
		"small": func() io.Reader {
			return &chunkReader{body: body, sizes: []int{smallSize - 1, smallSize, smallSize + 1}}
		},
	}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			r := NewReader(src())
			for i := 0; ; i++ {
				d, err := r.Next()
				if err == io.EOF {
					if i != len(want) {
						t.Fatalf("%d deltas, want %d", i, len(want))
					}
					return
				}
				if err != nil {
					t.Fatalf("delta %d: %v", i, err)
				}
				if i >= len(want) || d.Content != want[i] {
					t.Fatalf("delta %d: %d bytes %.10q, want %d bytes", i, len(d.Content), d.Content, len(want[min(i, len(want)-1)]))
				}
				if i%3 == 0 {
					r.Release() // a Release mid-stream loses nothing
				}
			}
		})
	}
}

// The big buffers come back for the next Reader, and no more than
// maxIdleBig wait.
func TestBufferIdleBound(t *testing.T) {
	var held [maxIdleBig + 2][]byte
	for i := range held {
		held[i] = getBig()
	}
	for _, b := range held {
		putBig(b)
	}
	idleBig.Lock()
	n := idleBig.n
	idleBig.Unlock()
	if n != maxIdleBig {
		t.Errorf("%d idle big buffers, want %d", n, maxIdleBig)
	}
	if b := getBig(); &b[0] != &held[maxIdleBig-1][0] {
		t.Error("getBig made a buffer while one was idle")
	}
}
