package interact

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// secretForm is a requested schema of one string property, named name and
// titled title.
func secretForm(name, title string) json.RawMessage {
	prop := map[string]any{"type": "string"}
	if title != "" {
		prop["title"] = title
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{name: prop}})
	return b
}

// TestSecretFieldWords: a form whose field is named or titled with the
// words of a secret is refused, however the words are written (cases,
// joined, split by underscores, zero-width or no-break spaces, soft
// hyphens, in look-alike Cyrillic, Greek, fullwidth or mathematical
// letters); ordinary words that hold the letters of one are not.
func TestSecretFieldWords(t *testing.T) {
	secret := []string{
		"password", "Password", "new_password", "newPassword", "mypassword", "PASSWORD2", "passwd", "Passphrase",
		"token", "Token", "API token", "api_token", "apiToken", "APIToken", "GitHub token", "githubToken",
		"GITHUB_TOKEN", "githubtoken", "access_token", "Auth token", "bearer token", "refresh_token",
		"PIN", "pin", "Your PIN", "PIN code", "pincode", "PINCode", "userPIN", "pin_number", "PIN-Nummer", "pin1",
		"Passwort", "Kennwort", "Mot de passe", "Contraseña", "senha", "Пароль", "パスワード", "密码", "비밀번호",
		"one-time code", "One time code", "oneTimeCode", "One-time password", "OTP", "TOTP code", "2FA code",
		"verification code", "Security code", "CVV", "cvc", "SSN", "Social security number",
		"secret", "Client secret", "client_secret", "clientSecret", "API key", "apikey", "x-api-key", "Your API key",
		"Private key", "private_key", "Secret key", "AWS access key", "SSH key", "Credit card", "Card number",
		"Credentials", "passcode", "Seed phrase",
		// Split where a person sees nothing, or a space.
		"pass\u200bword", "pass\u200cword", "pass\u200dword", "pass\u2060word", "pass\ufeffword", "pass\u00adword",
		"API\u00a0token", "API\u202ftoken", "one\u00a0time\u00a0code", "to\u200bken", "P\u200bI\u200bN", "pass\u00a0word",
		"pass\u202eword", "pass\u034fword", "pass\ufe0fword", "pass\u3164word", "t\u0000oken",
		// Look-alike letters.
		"p\u0430ssword", "\u0420\u0410SSWORD", "t\u043eken", "\u0442oken", "\u0440in", "\u0420\u0406N",
		"pa\u0455\u0455word", "t\u03bfken", "\u03a1\u0399\u039d", "ｐａｓｓｗｏｒｄ", "ＰＩＮ", "𝐩𝐚𝐬𝐬𝐰𝐨𝐫𝐝", "𝖙𝖔𝖐𝖊𝖓",
		"ᴘᴀssᴡᴏʀᴅ", "tᴏken", "Pässwörd", "pas\u0301sword", "PASSWORT", "Paßwort", "p\u0131n",
	}
	for _, s := range secret {
		for _, where := range []struct{ name, title string }{{s, ""}, {"value", s}} {
			_, err := PrepareElicitation(ElicitationRequest{Schema: secretForm(where.name, where.title)})
			if !errors.Is(err, ErrSecretField) {
				t.Errorf("field named %q titled %q: err = %v, want ErrSecretField", where.name, where.title, err)
			}
		}
	}

	ordinary := []string{
		"pinned", "spinach", "opinion", "Pinned message", "spin", "pinterest", "tokenizer", "Tokenizer model",
		"max_tokens", "Max tokens", "Secretary", "compass", "bypass", "passport", "Passenger", "keyboard", "monkey",
		"Project key", "Issue key", "Sort key", "Name", "Email address", "Repository", "Country code", "Postal code",
		"Promo code", "Code review", "City", "Color", "opinions", "happiness", "shipping", "Key name", "timecode",
		"pinyin", "Stockholm", "Description",
	}
	for _, s := range ordinary {
		for _, where := range []struct{ name, title string }{{s, ""}, {"value", s}} {
			if _, err := PrepareElicitation(ElicitationRequest{Schema: secretForm(where.name, where.title)}); err != nil {
				t.Errorf("field named %q titled %q: err = %v, want none", where.name, where.title, err)
			}
		}
	}
}

// TestTextWords: how the check reads a field's words.
func TestTextWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"GitHub token", []string{"git", "hub", "token"}},
		{"APIToken", []string{"api", "token"}},
		{"apiToken2", []string{"api", "token", "2"}},
		{"new_password", []string{"new", "password"}},
		{"pass\u200bword", []string{"password"}},
		{"API\u00a0token", []string{"api", "token"}},
		{"p\u0430ssword", []string{"password"}},
		{"ＰＡＳＳ", []string{"pass"}},
		{"Paßwort", []string{"passwort"}},
		{"Contraseña", []string{"contrasena"}},
		{"one-time code", []string{"one", "time", "code"}},
		{"spinach", []string{"spinach"}},
	} {
		assert.Equal(t, tc.want, textWords(tc.in), "%q", tc.in)
	}
}

// FuzzTextWords: the words of any text are words (letters, digits and
// spacing marks, in lower case, nothing a person cannot see, no
// look-alike letter left); reading them again gives them again; a
// character a person cannot see, put anywhere, changes nothing; and the
// secret check agrees with itself on the text and on its words.
func FuzzTextWords(f *testing.F) {
	for _, seed := range []string{
		"password", "GitHub token", "APIToken", "pass\u200bword", "p\u0430ssword", "ＰＩＮ", "𝐩𝐚𝐬𝐬", "Paßwort",
		"ẞ", "İstanbul", "ǅemal", "Ωhm", "K", "spinach", "one-time code", "\u0301", "a\u0000b", "\xff", "ᴘɪɴ",
	} {
		f.Add(seed, 0)
	}
	f.Fuzz(func(t *testing.T, s string, at int) {
		ws := textWords(s)
		for _, w := range ws {
			if w == "" || !utf8.ValidString(w) {
				t.Fatalf("textWords(%q) has the word %q", s, w)
			}
			for _, r := range w {
				if !inWord(r) || invisible(r) || unicode.IsUpper(r) {
					t.Fatalf("textWords(%q) has %U in the word %q", s, r, w)
				}
				if _, ok := lookAlike[r]; ok {
					t.Fatalf("textWords(%q) leaves the look-alike %U in %q", s, r, w)
				}
			}
		}
		if again := textWords(strings.Join(ws, " ")); !slices.Equal(again, ws) {
			t.Fatalf("textWords(%q) = %q, but read again %q", s, ws, again)
		}
		if !utf8.ValidString(s) {
			return
		}
		// A zero-width space between two runes.
		cuts := []int{0}
		for i := range s {
			cuts = append(cuts, i)
		}
		cuts = append(cuts, len(s))
		i := cuts[uint(at)%uint(len(cuts))]
		for _, hidden := range []string{"\u200b", "\u00ad", "\u202e", "\ufeff"} {
			with := s[:i] + hidden + s[i:]
			if got := textWords(with); !slices.Equal(got, ws) {
				t.Fatalf("textWords(%q) = %q, but %q gives %q", s, ws, with, got)
			}
		}
		if secretText(s) != secretText(strings.Join(ws, " ")) {
			t.Fatalf("secretText(%q) = %v, but its words %q read %v", s, secretText(s), ws, !secretText(s))
		}
	})
}
