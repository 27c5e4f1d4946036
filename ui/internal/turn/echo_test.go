package turn

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSameArguments: what JavaScript's JSON.parse and JSON.stringify make
// of the shown arguments is the same call (the echoes are those node
// prints); another value never is.
func TestSameArguments(t *testing.T) {
	same := []struct{ shown, echo string }{
		{`{"price":2.50}`, `{"price":2.5}`},
		{`{"qty":20.0}`, `{"qty":20}`},
		{`{"n":1e3}`, `{"n":1000}`},
		{`{"n":1E+2}`, `{"n":100}`},
		{`{"z":-0}`, `{"z":0}`},
		{`{"z":-0.0e5}`, `{"z":0}`},
		{`{"big":12345678901234567890}`, `{"big":12345678901234567000}`},
		{`{"big":12345678901234567890}`, `{"big":12345678901234567890}`},
		{`{"tiny":1e-400}`, `{"tiny":0}`},
		{`{"sub":4.9e-324}`, `{"sub":5e-324}`},
		{`{"huge":1e400}`, `{"huge":null}`},
		{`{"huge":1e400}`, `{"huge":10e399}`},
		{`{"x":0.1e1,"y":[1.10,{"z":-1E-7}]}`, `{"y":[1.1,{"z":-1e-7}],"x":1}`},
		{`{"s":"caf\u00e9 \/"}`, `{"s":"café /"}`},
		{`{"a":1,"a":2}`, `{"a":2}`}, // both decoders keep the last
		{`{ "city" : "Lima" }`, `{"city":"Lima"}`},
		{``, `{}`},
	}
	for _, c := range same {
		require.True(t, SameArguments(json.RawMessage(c.shown), json.RawMessage(c.echo)), "%s echoed as %s", c.shown, c.echo)
	}
	different := []struct{ shown, echo string }{
		{`{"city":"Lima"}`, `{"city":"Paris"}`},
		{`{"city":"Lima"}`, `{"city":"Lima","force":true}`},
		{`{"city":"Lima","force":true}`, `{"city":"Lima"}`},
		{`{"price":2.5}`, `{"price":"2.5"}`},
		{`{"price":2.5}`, `{"price":2.6}`},
		{`{"price":2.5}`, `{"price":null}`},
		{`{"big":12345678901234567890}`, `{"big":12345678901234577000}`},
		{`{"big":12345678901234567890}`, `{"big":12345678901234569217}`},
		{`{"n":1}`, `{"n":true}`},
		{`{"l":[1,2]}`, `{"l":[2,1]}`},
		{`{"l":[1,2]}`, `{"l":[1,2,3]}`},
		{`{"o":{}}`, `{"o":[]}`},
		{`{"huge":1e400}`, `{"huge":2e400}`},
		{`{"huge":1e400}`, `{"huge":1.7976931348623157e308}`},
		{`{"a":1}`, `{"a":1} x`},
		{`{"a":1`, `{"a":1}`},
		{`{"s":"\u00e9"}`, "{\"s\":\"\xe9\"}"},
		{`{"city":"Lima"}`, `[]`},
	}
	for _, c := range different {
		require.False(t, SameArguments(json.RawMessage(c.shown), json.RawMessage(c.echo)), "%s echoed as %s", c.shown, c.echo)
	}
}

func TestSameNumber(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"0", "-0", true},
		{"0e-5", "0.000", true},
		{"100", "1e2", true},
		{"100", "1000e-1", true},
		{"123.4500", "1.2345e2", true},
		{"1e1000000001", "1e1000000001", true}, // beyond maxExponent: written the same
		{"1e1000000001", "10e1000000000", false},
		{"1e-1000000001", "0", true}, // as doubles, both 0
		{"1", "10", false},
		{"-1", "1", false},
		{"9007199254740993", "9007199254740992", true}, // 2^53+1 reads as 2^53
		{"9007199254740995", "9007199254740996", true},
		{"9007199254740995", "9007199254740994", false},
	} {
		require.Equal(t, c.want, sameNumber(c.a, c.b), "%s %s", c.a, c.b)
		require.Equal(t, c.want, sameNumber(c.b, c.a), "%s %s", c.b, c.a)
	}
}

// FuzzSameNumber holds the decimal comparison equal to math/big's on
// numbers with a small exponent, and the whole comparison symmetric.
func FuzzSameNumber(f *testing.F) {
	for _, s := range [][2]string{{"2.50", "2.5"}, {"1e3", "1000"}, {"-0", "0"}, {"12345678901234567890", "12345678901234567000"}, {"1e400", "1E400"}, {"0.1", "1e-1"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if !isNumber(a) || !isNumber(b) {
			return
		}
		if sameNumber(a, b) != sameNumber(b, a) {
			t.Fatalf("not symmetric: %s %s", a, b)
		}
		if !sameNumber(a, a) {
			t.Fatalf("%s is not itself", a)
		}
		if exponent(a) > 400 || exponent(b) > 400 {
			return
		}
		ra, _ := new(big.Rat).SetString(a)
		rb, _ := new(big.Rat).SetString(b)
		if got, want := sameDecimal(a, b), ra.Cmp(rb) == 0; got != want {
			t.Fatalf("sameDecimal(%s, %s) = %v, math/big says %v", a, b, got, want)
		}
	})
}

// FuzzSameArguments: any JSON text is the same as itself, and as what a
// reader of doubles writes back of it.
func FuzzSameArguments(f *testing.F) {
	for _, s := range []string{`{"price":2.50,"l":[20.0,-0,1e3]}`, `{"big":12345678901234567890}`, `{"s":"\u00e9\ud800"}`, `[{"a":{"b":null}},true]`, `"x"`, `{"a":1e400}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		raw := json.RawMessage(s)
		if _, ok := decodeExact(raw); !ok {
			return
		}
		if !SameArguments(raw, raw) {
			t.Fatalf("%s is not itself", s)
		}
		var doubles any
		if json.Unmarshal(raw, &doubles) != nil {
			return // a number beyond the doubles: Go's decoder refuses it
		}
		back, err := json.Marshal(doubles)
		if err != nil {
			t.Fatal(err)
		}
		if !SameArguments(raw, back) {
			t.Fatalf("%s written back as %s is not the same", s, back)
		}
	})
}

func isNumber(s string) bool {
	var n json.Number
	return s != "" && strings.TrimSpace(s) == s && s[0] != '"' && json.Unmarshal([]byte(s), &n) == nil
}

// exponent returns the magnitude of a number's exponent (a huge one when
// it does not parse).
func exponent(s string) int64 {
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(s[i+1:], "+"), 10, 64)
	if err != nil {
		return 1 << 62
	}
	if n < 0 {
		n = -n
	}
	return n
}
