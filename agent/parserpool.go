package agent

import (
	"sync"

	"github.com/planround/planround/stream"
)

// maxPooledParser is the largest reply buffer (stream.Parser.Cap) a parser
// may hold to go back to its Agent's pool: one that grew on a longer reply
// is left to the garbage collector.
const maxPooledParser = 16 << 10

// maxIdleParsers is how many parsers an Agent's pool keeps at most. The
// pool saves the parsers of rounds that follow one another; the parsers
// of a thousand runs that all wait for a person at once are not worth
// keeping until they go on (a sync.Pool keeps them all until the second
// garbage collection after).
const maxIdleParsers = 32

// parserPool is a bounded stack of idle stream parsers.
type parserPool struct {
	mu   sync.Mutex
	idle []*stream.Parser
}

func (pp *parserPool) get() *stream.Parser {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	n := len(pp.idle)
	if n == 0 {
		return nil
	}
	p := pp.idle[n-1]
	pp.idle[n-1] = nil
	pp.idle = pp.idle[:n-1]
	return p
}

// put keeps p unless the pool is full or p grew past maxPooledParser.
func (pp *parserPool) put(p *stream.Parser) {
	if p.Cap() > maxPooledParser {
		return
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if len(pp.idle) < maxIdleParsers {
		pp.idle = append(pp.idle, p)
	}
}

// takeParser gives r a stream parser for one round, from its Agent's pool.
func (r *run) takeParser() {
	if p := r.a.parsers.get(); p != nil {
		p.Reset()
		r.parser = p
		return
	}
	r.parser = stream.NewParser(stream.Config{Tags: r.a.tags, Mode: r.a.cfg.TextMode})
}

// returnParser gives the round's parser back to the pool. Strings it
// returned (Raw, pieces) stay valid.
func (r *run) returnParser() {
	if p := r.parser; p != nil {
		r.a.parsers.put(p)
	}
	r.parser = nil
}
