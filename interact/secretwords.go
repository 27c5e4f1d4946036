package interact

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/planround/planround/internal/weblink"
)

// The words that make a form's field ask for a secret ([ErrSecretField]),
// matched against the field's name and title as [textWords] reads them.
// Each entry is written as people write it; it is read as the field is.
var (
	// secretStems are found anywhere in a field's words put together:
	// long enough that no ordinary word holds them ("newPassword",
	// "mypassword", "pass word").
	secretStems = []string{
		"password", "passwd", "passphrase", "passwort", "kennwort", "mot de passe", "contraseña", "senha",
		"wachtwoord", "lösenord", "hasło", "пароль", "パスワード", "密码", "密碼", "비밀번호",
		"api key", "api token", "api secret", "access token", "auth token", "bearer token", "refresh token",
		"session token", "private key", "secret key", "access key", "signing key", "encryption key", "ssh key",
		"license key", "client secret", "credit card", "card number", "social security", "seed phrase",
		"recovery phrase", "one-time password", "one-time code", "one-time pin",
	}
	// secretWords are whole words, or words written together ("PIN code",
	// "pincode", "PINCode"): inside another word they mean something else
	// ("spinach", "opinion", "tokenizer").
	secretWords = []string{
		"pin", "pin code", "pin number", "token", "secret", "passcode", "otp", "totp", "hotp", "cvv", "cvc", "cvv2",
		"ssn", "verification code", "security code", "auth code", "authorization code", "mfa code", "2fa code",
		"recovery code", "backup code", "credential", "credentials",
	}
	// secretSuffixes end a word that names a secret ("githubtoken",
	// "clientsecret").
	secretSuffixes = []string{"token", "secret"}
)

// The entries above as fields are read: lower case, words put together.
var stems, words = readEntries(secretStems), wordSet(readEntries(secretWords))

func readEntries(list []string) []string {
	out := make([]string, 0, len(list))
	for _, e := range list {
		out = append(out, strings.Join(textWords(e), ""))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func wordSet(list []string) map[string]bool {
	out := make(map[string]bool, len(list))
	for _, w := range list {
		out[w] = true
	}
	return out
}

// maxEntryWords is the most words an entry has ("one time pin").
const maxEntryWords = 4

// looksSecret reports whether a field's words name a secret: its name or
// its title, read as [textWords] reads them, holds a stem, is a word, or
// has a word that ends with a suffix, of those above.
func looksSecret(f ElicitField) bool {
	return secretText(f.Name) || secretText(f.Title)
}

// secretText reports whether s names a secret (see looksSecret).
func secretText(s string) bool {
	ws := textWords(s)
	var joined []byte // ws[i:j] put together
	for i, w := range ws {
		for _, suf := range secretSuffixes {
			if strings.HasSuffix(w, suf) {
				return true
			}
		}
		joined = joined[:0]
		for _, next := range ws[i:min(i+maxEntryWords, len(ws))] {
			joined = append(joined, next...)
			if words[string(joined)] {
				return true
			}
		}
	}
	all := strings.Join(ws, "")
	for _, stem := range stems {
		if strings.Contains(all, stem) {
			return true
		}
	}
	return false
}

// textWords returns the words of s as the secret check reads them, so that
// what reads the same to a person is the same to the check:
//
//   - compatibility forms are folded and marks dropped (NFKD): a fullwidth
//     or mathematical letter is the letter, "ä" is "a", a no-break space
//     is a space;
//   - what a person cannot see is dropped: format characters (Cf: zero-width
//     spaces and joiners, soft hyphens, direction marks), default
//     ignorable code points, variation selectors;
//   - the Cyrillic, Greek and Latin small capital letters that look like a
//     Latin letter are that letter (lookAlike);
//   - words are runs of letters and digits, cut where a lower-case letter
//     meets an upper-case one ("apiToken", "APIToken"), and between
//     letters and digits; they come in lower case, ß as ss.
func textWords(s string) []string {
	var out []string
	var word []rune
	flush := func() {
		if len(word) > 0 {
			out = append(out, lower(word))
			word = word[:0]
		}
	}
	var prev rune
	for _, r := range foldRunes(s) {
		if !inWord(r) {
			flush()
			prev = 0
			continue
		}
		if prev != 0 && cut(prev, r) {
			flush()
		}
		// "APIToken": the last capital of a run begins the next word.
		if n := len(word); n >= 2 && unicode.IsLower(r) && unicode.IsUpper(prev) && unicode.IsUpper(word[n-2]) {
			out = append(out, lower(word[:n-1]))
			word = append(word[:0], prev)
		}
		word = append(word, r)
		prev = r
	}
	flush()
	return out
}

// lower returns word in lower case, its lower-case letters that look like
// a Latin one as that letter, ß as ss.
func lower(word []rune) string {
	var b strings.Builder
	b.Grow(len(word))
	for _, r := range word {
		r = unicode.ToLower(r)
		if l, ok := lookAlike[r]; ok {
			r = unicode.ToLower(l)
		}
		if r == 'ß' {
			b.WriteString("ss")
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// inWord reports whether r belongs to a word: a letter, a digit, or a mark
// that is part of a letter (a spacing mark).
func inWord(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mc, r)
}

// cut reports whether a word ends between a and b.
func cut(a, b rune) bool {
	return (unicode.IsLower(a) && unicode.IsUpper(b)) || unicode.IsDigit(a) != unicode.IsDigit(b)
}

// foldRunes returns s decomposed (NFKD), without what a person cannot see
// (invisible) and without non-spacing and enclosing marks, with look-alike
// letters folded to Latin ones; the case is kept.
func foldRunes(s string) []rune {
	// Bytes that are not UTF-8 are dropped: they show as nothing, and
	// would stop the decomposition of what follows them.
	s = norm.NFKD.String(strings.ToValidUTF8(s, ""))
	out := make([]rune, 0, utf8.RuneCountInString(s))
	for _, r := range s {
		if invisible(r) || unicode.In(r, unicode.Mn, unicode.Me) {
			continue
		}
		if l, ok := lookAlike[r]; ok {
			r = l
		}
		out = append(out, r)
	}
	return out
}

// invisible reports whether r is a character a person does not see (see
// weblink.Invisible).
func invisible(r rune) bool { return weblink.Invisible(r) }

// lookAlike maps the letters of other scripts that read as a Latin letter
// to that letter, in both cases (what NFKD does not fold already: it does
// fullwidth and mathematical letters). It is a small hand-written table
// of the common Cyrillic and Greek look-alikes and of the Latin small
// capitals, enough for the words of a secret, not Unicode's confusables.
var lookAlike = map[rune]rune{
	// Cyrillic.
	'а': 'a', 'А': 'A', 'в': 'b', 'В': 'B', 'с': 'c', 'С': 'C', 'ԁ': 'd', 'е': 'e', 'Е': 'E', 'һ': 'h', 'Н': 'H',
	'і': 'i', 'І': 'I', 'ј': 'j', 'Ј': 'J', 'к': 'k', 'К': 'K', 'ӏ': 'l', 'Ӏ': 'I', 'м': 'm', 'М': 'M', 'о': 'o',
	'О': 'O', 'р': 'p', 'Р': 'P', 'ԛ': 'q', 'Ԛ': 'Q', 'ѕ': 's', 'Ѕ': 'S', 'т': 't', 'Т': 'T', 'у': 'y', 'У': 'Y',
	'ԝ': 'w', 'Ԝ': 'W', 'х': 'x', 'Х': 'X', 'ѵ': 'v', 'Ѵ': 'V', 'ү': 'y', 'Ү': 'Y',
	// Greek.
	'α': 'a', 'Α': 'A', 'Β': 'B', 'ε': 'e', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'ι': 'i', 'Ι': 'I', 'κ': 'k', 'Κ': 'K',
	'Μ': 'M', 'ν': 'v', 'Ν': 'N', 'ο': 'o', 'Ο': 'O', 'ρ': 'p', 'Ρ': 'P', 'τ': 't', 'Τ': 'T', 'υ': 'u', 'Υ': 'Y',
	'χ': 'x', 'Χ': 'X', 'ϲ': 'c', 'Ϲ': 'C', 'ϳ': 'j',
	// Latin letters that read as others: small capitals, the dotless i,
	// the Latin alpha and script g, the l with a stroke.
	'ᴀ': 'a', 'ʙ': 'b', 'ᴄ': 'c', 'ᴅ': 'd', 'ᴇ': 'e', 'ɢ': 'g', 'ʜ': 'h', 'ɪ': 'i', 'ᴊ': 'j', 'ᴋ': 'k', 'ʟ': 'l',
	'ᴍ': 'm', 'ɴ': 'n', 'ᴏ': 'o', 'ᴘ': 'p', 'ʀ': 'r', 'ꜱ': 's', 'ᴛ': 't', 'ᴜ': 'u', 'ᴠ': 'v', 'ᴡ': 'w', 'ʏ': 'y',
	'ᴢ': 'z', 'ı': 'i', 'ɑ': 'a', 'ɡ': 'g', 'ł': 'l',
}
