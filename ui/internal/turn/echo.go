package turn

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SameArguments reports whether echo, the arguments a client sends back
// with its decision, are the arguments shown, as the client's own reading
// and writing of JSON leaves them: the same value when numbers are
// compared by their decimal value exactly (2.50 is 2.5, 20.0 is 20, 1e3 is
// 1000, -0 is 0), or when a number of echo is what a client that reads
// numbers as IEEE 754 doubles (JavaScript's JSON.parse, then
// JSON.stringify) makes of the number shown: 12345678901234567000 for
// 12345678901234567890, and null for a number beyond the doubles (1e400,
// which JavaScript reads as Infinity). Strings, keys, literals and the
// shape must be the same as Go's decoder reads them; key order and white
// space do not matter. Anything else, such as another string, a number
// that is not the shown one's reading, a key more or less, is not the same.
//
// Only the comparison is lenient: a decision still binds to the shown
// arguments (their digest), which are what runs.
func SameArguments(shown, echo json.RawMessage) bool {
	shown, echo = bytes.Trim(shown, jsonSpace), bytes.Trim(echo, jsonSpace)
	if len(shown) == 0 {
		shown = json.RawMessage("{}")
	}
	if len(echo) == 0 {
		echo = json.RawMessage("{}")
	}
	if bytes.Equal(shown, echo) {
		return true
	}
	s, ok := decodeExact(shown)
	if !ok {
		return false
	}
	e, ok := decodeExact(echo)
	if !ok {
		return false
	}
	return sameValue(s, e)
}

// jsonSpace is JSON's insignificant white space.
const jsonSpace = " \t\r\n"

// decodeExact decodes raw, valid JSON in valid UTF-8 with nothing after the
// value, keeping its numbers as written.
func decodeExact(raw []byte) (any, bool) {
	if !json.Valid(raw) || !utf8.Valid(raw) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}

// sameValue compares a shown value with its echo (see SameArguments).
func sameValue(shown, echo any) bool {
	switch s := shown.(type) {
	case map[string]any:
		e, ok := echo.(map[string]any)
		if !ok || len(e) != len(s) {
			return false
		}
		for k, sv := range s {
			ev, ok := e[k]
			if !ok || !sameValue(sv, ev) {
				return false
			}
		}
		return true
	case []any:
		e, ok := echo.([]any)
		if !ok || len(e) != len(s) {
			return false
		}
		for i := range s {
			if !sameValue(s[i], e[i]) {
				return false
			}
		}
		return true
	case json.Number:
		switch e := echo.(type) {
		case json.Number:
			return sameNumber(string(s), string(e))
		case nil:
			// JavaScript reads a number beyond the doubles as Infinity,
			// which JSON.stringify writes as null.
			_, err := strconv.ParseFloat(string(s), 64)
			return err != nil
		}
		return false
	case string:
		e, ok := echo.(string)
		return ok && e == s
	case bool:
		e, ok := echo.(bool)
		return ok && e == s
	case nil:
		return echo == nil
	}
	return false
}

// sameNumber reports whether the JSON number echo stands for the JSON
// number shown: the same decimal value exactly, or the same double when
// both are read as IEEE 754 doubles, as JavaScript reads them (the double
// nearest to each; a number beyond the doubles is the same as none).
func sameNumber(shown, echo string) bool {
	if sameDecimal(shown, echo) {
		return true
	}
	s, err := strconv.ParseFloat(shown, 64)
	if err != nil {
		return false
	}
	e, err := strconv.ParseFloat(echo, 64)
	return err == nil && s == e
}

// sameDecimal reports whether two JSON numbers have the same decimal value
// (-0 is 0). A number whose exponent is beyond maxExponent is the same
// only as itself written the same way.
func sameDecimal(a, b string) bool {
	an, ad, ae, aok := decimal(a)
	bn, bd, be, bok := decimal(b)
	if !aok || !bok {
		return a == b
	}
	if ad == "" || bd == "" {
		return ad == bd // zero, whatever its sign
	}
	return an == bn && ad == bd && ae == be
}

// maxExponent bounds the exponents decimal reads.
const maxExponent = 1_000_000_000

// decimal splits a JSON number into its sign, its significant digits
// (without leading or trailing zeros; "" for zero) and the power of ten of
// its last digit. ok is false when s is not a JSON number or its exponent
// is beyond ±maxExponent.
func decimal(s string) (neg bool, digits string, exp int64, ok bool) {
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	mant := s
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e := strings.TrimPrefix(s[i+1:], "+")
		sign := int64(1)
		if strings.HasPrefix(e, "-") {
			sign, e = -1, e[1:]
		}
		if e == "" || !allDigits(e) {
			return false, "", 0, false
		}
		e = strings.TrimLeft(e, "0")
		if len(e) > len("1000000000") {
			return false, "", 0, false
		}
		n, err := strconv.ParseInt("0"+e, 10, 64)
		if err != nil || n > maxExponent {
			return false, "", 0, false
		}
		exp = sign * n
	}
	whole, frac, _ := strings.Cut(mant, ".")
	if whole == "" || !allDigits(whole) || !allDigits(frac) {
		return false, "", 0, false
	}
	exp -= int64(len(frac))
	digits = strings.TrimLeft(whole+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	return neg, trimmed, exp, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
