package memory

import (
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strings"
)

// MaxImageSize is the largest image, in bytes, that a user message may
// carry: [ValidateImage] refuses a larger Data, or a data: URL that decodes
// to more. It is the limit OpenAI sets per image.
const MaxImageSize = 20 << 20

// Image is an image beside the text of a user message: a URL the provider
// fetches, or the image's bytes with their MIME type. Exactly one of URL
// and Data is set; [ValidateImage] says what is accepted.
//
// An image is sent with every request of its turn. In later turns
// [Truncate] replaces it by a line of text saying what it was, unless
// [TruncateOptions.KeepImages] is set: each image costs its tokens in every
// request that carries it. Stores keep images whole (the bytes, up to
// [MaxImageSize] each) with their message.
type Image struct {
	// URL is an http or https URL, or a data: URL ("data:image/png;base64,...").
	URL string `json:"url,omitempty"`
	// MIMEType is the media type, such as "image/png": required with
	// Data, optional with URL.
	MIMEType string `json:"mime_type,omitempty"`
	// Data is the image itself (base64 in JSON).
	Data []byte `json:"data,omitempty"`
}

// String describes the image in a few words, for logs and placeholders:
// its type and size ("image/png, 48 KB") or its URL (cut when long).
func (img Image) String() string {
	if img.URL == "" {
		return img.MIMEType + ", " + sizeText(len(img.Data))
	}
	if mt, payload, ok := splitDataURL(img.URL); ok {
		return mt + ", " + sizeText(base64.StdEncoding.DecodedLen(len(payload)))
	}
	const max = 100
	if len(img.URL) > max {
		return img.URL[:max] + "…"
	}
	return img.URL
}

// sizeText renders a size in bytes for people.
func sizeText(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 10<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	case n < 1<<20:
		return fmt.Sprintf("%d KB", (n+1<<9)>>10)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}

// ValidateImage reports whether img may go with a user message: either an
// http or https URL with a host, or a data: URL holding a base64 image of
// at most [MaxImageSize] bytes, or Data of at most MaxImageSize bytes with
// an image MIMEType without parameters ("image/png", "image/jpeg",
// "image/webp", "image/gif"). A MIMEType given with a URL must be an image
// type too. Stores call it for every image they append (through
// [ValidateMessages]); the agent calls it for the images of its
// input, and a host may call it for an image a user sends.
func ValidateImage(img Image) error {
	switch {
	case img.URL == "" && len(img.Data) == 0:
		return errors.New("image has neither URL nor Data")
	case img.URL != "" && len(img.Data) > 0:
		return errors.New("image has both URL and Data")
	}
	if img.MIMEType != "" || img.URL == "" {
		if err := checkImageType(img.MIMEType); err != nil {
			return err
		}
	}
	if img.URL == "" {
		if len(img.Data) > MaxImageSize {
			return fmt.Errorf("image of %d bytes is larger than MaxImageSize (%d)", len(img.Data), MaxImageSize)
		}
		return nil
	}
	if strings.HasPrefix(img.URL, "data:") {
		mt, payload, ok := splitDataURL(img.URL)
		if !ok {
			return errors.New(`image data: URL is not "data:<type>;base64,<data>"`)
		}
		if err := checkImageType(mt); err != nil {
			return err
		}
		// DecodedLen is at most 2 bytes more than the data's length.
		if n := base64.StdEncoding.DecodedLen(len(payload)); n > MaxImageSize+2 {
			return fmt.Errorf("image of about %d bytes is larger than MaxImageSize (%d)", n, MaxImageSize)
		}
		b, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return fmt.Errorf("image data: URL: invalid base64: %v", err)
		}
		if len(b) > MaxImageSize {
			return fmt.Errorf("image of %d bytes is larger than MaxImageSize (%d)", len(b), MaxImageSize)
		}
		return nil
	}
	u, err := url.Parse(img.URL)
	switch {
	case err != nil:
		return fmt.Errorf("image URL: %v", errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("image URL %.100q: want an http, https or data URL", img.URL)
	case u.Host == "":
		return fmt.Errorf("image URL %.100q has no host", img.URL)
	}
	return nil
}

// checkImageType reports whether mt is an image media type without
// parameters.
func checkImageType(mt string) error {
	if mt == "" {
		return errors.New("image has Data but no MIMEType")
	}
	parsed, params, err := mime.ParseMediaType(mt)
	switch {
	case err != nil || len(params) > 0 || parsed != strings.ToLower(strings.TrimSpace(mt)):
		return fmt.Errorf("image MIME type %q: want a type without parameters, such as image/png", mt)
	case !strings.HasPrefix(parsed, "image/"):
		return fmt.Errorf("image MIME type %q is not an image type", mt)
	}
	return nil
}

// splitDataURL splits "data:<type>;base64,<payload>".
func splitDataURL(s string) (mediaType, payload string, ok bool) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return "", "", false
	}
	head, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", false
	}
	mediaType, ok = strings.CutSuffix(head, ";base64")
	return mediaType, payload, ok
}

// cloneImages returns a copy of imgs that shares no memory with it.
func cloneImages(imgs []Image) []Image {
	if imgs == nil {
		return nil
	}
	out := make([]Image, len(imgs))
	for i, img := range imgs {
		if img.Data != nil {
			img.Data = append([]byte{}, img.Data...)
		}
		out[i] = img
	}
	return out
}

// imagePlaceholder is the text Truncate leaves for an image of an earlier
// turn.
func imagePlaceholder(img Image) string {
	return "[earlier image: " + img.String() + "]"
}
