package memory_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/memory"
)

var (
	pngData = []byte("\x89PNG\r\n\x1a\n fake image bytes")
	png     = memory.Image{MIMEType: "image/png", Data: pngData}
	catURL  = memory.Image{URL: "https://example.com/cat.jpg"}
)

func userWith(text string, imgs ...memory.Image) memory.Message {
	return memory.Message{Role: memory.RoleUser, Content: text, Images: imgs}
}

func TestValidateImage(t *testing.T) {
	dataURL := func(mime string, n int) string {
		return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(make([]byte, n))
	}
	tests := []struct {
		name string
		img  memory.Image
		want string // "" for valid
	}{
		{"bytes", png, ""},
		{"jpeg bytes", memory.Image{MIMEType: "image/jpeg", Data: []byte{1}}, ""},
		{"https", catURL, ""},
		{"http with type", memory.Image{URL: "http://127.0.0.1/a.gif", MIMEType: "image/gif"}, ""},
		{"data URL", memory.Image{URL: dataURL("image/webp", 10)}, ""},
		{"largest bytes", memory.Image{MIMEType: "image/png", Data: make([]byte, memory.MaxImageSize)}, ""},
		{"empty", memory.Image{}, "neither URL nor Data"},
		{"both", memory.Image{URL: catURL.URL, MIMEType: "image/png", Data: pngData}, "both URL and Data"},
		{"bytes without type", memory.Image{Data: pngData}, "MIMEType"},
		{"not an image type", memory.Image{MIMEType: "text/html", Data: pngData}, `"text/html" is not an image type`},
		{"type with parameters", memory.Image{MIMEType: "image/png; x=1", Data: pngData}, "image/png; x=1"},
		{"bad type", memory.Image{MIMEType: "image/", Data: pngData}, "image/"},
		{"too large", memory.Image{MIMEType: "image/png", Data: make([]byte, memory.MaxImageSize+1)}, "larger than"},
		{"data URL too large", memory.Image{URL: dataURL("image/png", memory.MaxImageSize+1)}, "larger than"},
		{"data URL of text", memory.Image{URL: dataURL("text/plain", 3)}, "not an image type"},
		{"data URL not base64", memory.Image{URL: "data:image/png,abc"}, "base64"},
		{"data URL bad base64", memory.Image{URL: "data:image/png;base64,!!!"}, "base64"},
		{"file URL", memory.Image{URL: "file:///etc/passwd"}, "http, https or data"},
		{"relative URL", memory.Image{URL: "cat.jpg"}, "http, https or data"},
		{"no host", memory.Image{URL: "https:///cat.jpg"}, "host"},
		{"URL with bad type", memory.Image{URL: catURL.URL, MIMEType: "video/mp4"}, "not an image type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := memory.ValidateImage(tt.img)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestValidateMessagesImages(t *testing.T) {
	assert.NoError(t, memory.ValidateMessages([]memory.Message{userWith("look", png, catURL), userWith("", png)}))
	err := memory.ValidateMessages([]memory.Message{userWith("x"), {Role: memory.RoleAssistant, Images: []memory.Image{png}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "message 1")
	assert.Contains(t, err.Error(), "only user messages")
	err = memory.ValidateMessages([]memory.Message{userWith("x", png, memory.Image{})})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "message 0: image 1")
}

func TestImageString(t *testing.T) {
	assert.Equal(t, "image/png, 25 bytes", png.String())
	assert.Equal(t, "image/jpeg, 48 KB", memory.Image{MIMEType: "image/jpeg", Data: make([]byte, 48<<10)}.String())
	assert.Equal(t, "image/jpeg, 2.5 MB", memory.Image{MIMEType: "image/jpeg", Data: make([]byte, 5<<19)}.String())
	assert.Equal(t, "https://example.com/cat.jpg", catURL.String())
	data := memory.Image{URL: "data:image/gif;base64," + base64.StdEncoding.EncodeToString(make([]byte, 3000))}
	assert.Equal(t, "image/gif, 2.9 KB", data.String())
	long := memory.Image{URL: "https://example.com/" + strings.Repeat("x", 200)}
	assert.Less(t, len(long.String()), 120, "a long URL is cut")
	// A message printed with %v shows the description, not the bytes.
	assert.NotContains(t, fmt.Sprint(userWith("hi", png)), "fake image bytes")
}

func TestImageJSON(t *testing.T) {
	m := userWith("look", png, catURL)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"images":[{"mime_type":"image/png","data":"`+base64.StdEncoding.EncodeToString(pngData)+`"},{"url":"https://example.com/cat.jpg"}]`)
	var back memory.Message
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, m, back)
}

// TestTruncateImages: images of earlier turns are not sent again: each
// becomes a line of text in its message saying what it was; the current
// turn's images, and every image with KeepImages, are sent.
func TestTruncateImages(t *testing.T) {
	in := []memory.Message{
		userWith("What is this?", png, catURL),
		asst("A cat."),
		userWith("", png),
		asst("Same."),
		userWith("And this?", png),
	}
	orig := cloneMsgs(in)
	got := memory.Truncate(in, memory.TruncateOptions{})
	assert.Equal(t, orig, in, "Truncate changed its input")
	assert.Equal(t, []memory.Message{
		userWith("What is this?\n\n[earlier image: image/png, 25 bytes]\n[earlier image: https://example.com/cat.jpg]"),
		asst("A cat."),
		userWith("[earlier image: image/png, 25 bytes]"),
		asst("Same."),
		userWith("And this?", png),
	}, got)

	kept := memory.Truncate(in, memory.TruncateOptions{KeepImages: true})
	assert.Equal(t, in, kept)
	off := memory.Truncate(in, memory.TruncateOptions{Limit: -1})
	assert.Equal(t, got, off, "a negative Limit is about text: images follow KeepImages")

	// The result shares no image bytes with the input.
	kept[4].Images[0].Data[0] = 'X'
	assert.Equal(t, byte(0x89), in[4].Images[0].Data[0])
}

func TestStrictMergesImages(t *testing.T) {
	in := []memory.Message{
		sysMsg("s"),
		userWith("one", png),
		userWith("", catURL),
		userWith("two"),
		asst("ok"),
	}
	got := memory.Strict(in)
	assert.Equal(t, []memory.Message{sysMsg("s"), userWith("one\n\ntwo", png, catURL), asst("ok")}, got)
	got[1].Images[0].Data[0] = 'X'
	assert.Equal(t, byte(0x89), in[1].Images[0].Data[0], "Strict shares no memory with its input")
	assert.Len(t, in[1].Images, 1, "Strict changed its input")
}

func TestRepairKeepsImages(t *testing.T) {
	in := []memory.Message{userWith("look", png)}
	assert.Equal(t, in, memory.Repair(in))
}

func cloneMsgs(msgs []memory.Message) []memory.Message {
	b, _ := json.Marshal(msgs)
	var out []memory.Message
	_ = json.Unmarshal(b, &out)
	return out
}
